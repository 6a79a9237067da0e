"""app/drainer.py's name for sync_queue/sqlite.py ``in_words`` (the one answer to which errors
are told in words), until it imports it from there."""

from sync_queue.sqlite import in_words

__all__ = ["in_words"]
