"""The two priorities of queued work (alone in a module: the hook reads them)."""

INTERACTIVE = "interactive"  # a user's edit (hook): outranks bulk work
BULK = "bulk"  # scan-originated events and the all/recent tasks
PRIORITIES = (INTERACTIVE, BULK)
