"""Write the ``tasks:`` block of Stash2Plex.yml from the registry (validation/modes.py).

    python tools/plugin_yml.py

Stash reads the YAML as a static file, so the menu cannot come from the code at run time:
this writes it, and tests/test_plugin_yml.py fails while the file differs from the registry.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
_BLOCK = re.compile(r"^tasks:\n(?:  .*\n)*", re.M)


def scalar(text: str) -> str:
    """``text`` as a YAML scalar: plain when YAML reads it back as it is, else double-quoted
    (a JSON string is a YAML double-quoted scalar)."""
    plain = not re.search(r":(\s|$)|\s#|^[\s!&*?|>'\"%@`{}\[\],#-]|\s$", text)
    return text if plain else json.dumps(text, ensure_ascii=False)


def tasks_block() -> str:
    from validation.modes import MODES

    lines = ["tasks:"]
    for mode in MODES.values():
        for entry in mode.menu:
            lines += [f"  - name: {scalar(entry.name)}", f"    description: {scalar(entry.description)}"]
            lines += ["    defaultArgs:", f"      mode: {mode.id}"] + (
                ['      dry_run: "true"'] if entry.dry_run else []
            )
    return "\n".join(lines) + "\n"


def written(text: str) -> str:
    """The YAML ``text`` with its ``tasks:`` block replaced by the registry's."""
    return _BLOCK.sub(lambda _: tasks_block(), text, count=1)


def main() -> int:
    path = REPO / "Stash2Plex.yml"
    text = path.read_text(encoding="utf-8")
    path.write_text(written(text), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.path.insert(0, str(REPO))
    sys.exit(main())
