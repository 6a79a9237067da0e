"""Stable placeholders for file paths and scene titles, for logs users share (``private_logs``).

After secret redaction every log line, the queue status and notifications pass through
:class:`Placeholders`: a title becomes ``<title-1a2b3c4d>``, a path ``<path-5e6f7a8b>``,
always the same for one data folder (an HMAC keyed by ``<data>/privacy.key``), so "the
same file failed twice" still reads, and a guessed title cannot be tested without the key.
Titles and paths the worker handles are noted (``note_title``/``note_path``); any other
absolute path is found by its shape. Titles under 3 characters are left alone.
"""

from __future__ import annotations

import hashlib
import hmac
import re
import secrets
import threading
from collections import OrderedDict
from pathlib import Path

from core.platform import file_lock

KEY_FILE = "privacy.key"
MAX_VALUES = 1024
MIN_TITLE = 3
_PATH = re.compile(r"(?<![\w:/.<\\-])(?:/|[A-Za-z]:\\|\\\\)[^\s'\",;()<>]*[/\\][^\s'\",;()<>]*")


def load_key(data_dir: Path) -> bytes:
    """The data folder's placeholder key, created on first use (never leaves the folder); under
    a lock, so no process reads as its key the empty file another made and has not written yet."""
    path = Path(data_dir) / KEY_FILE
    with file_lock(path.with_name(KEY_FILE + ".lock")):
        key = path.read_text(encoding="ascii").strip() if path.exists() else ""
        if not key:
            key = secrets.token_hex(16)
            path.write_text(key, encoding="ascii")
    return bytes.fromhex(key)


class Placeholders:
    def __init__(self, key: bytes) -> None:
        self.key = key
        self._known: OrderedDict[str, str] = OrderedDict()  # value → placeholder, most recent last
        self._lock = threading.Lock()

    def placeholder(self, kind: str, value: str) -> str:
        digest = hmac.new(self.key, f"{kind}\0{value}".encode("utf-8", "surrogatepass"), hashlib.sha256).hexdigest()
        return f"<{kind}-{digest[:8]}>"

    def title(self, value: str | None) -> str | None:
        return self.placeholder("title", value) if value else value

    def note_title(self, value: str | None) -> None:
        if value and len(value.strip()) >= MIN_TITLE:
            self._remember(value, self.placeholder("title", value))

    def note_path(self, value: str | None) -> None:
        if not value:
            return
        self._remember(value, self.placeholder("path", value))
        folder, _, name = value.rstrip("/\\").replace("\\", "/").rpartition("/")
        if "\\" in value:
            folder = folder.replace("/", "\\")
        for part in (folder, name):  # the folder (a scan request) and the file name (a match message)
            if len(part) > 3:
                self._remember(part, self.placeholder("path", part))

    def _remember(self, value: str, placeholder: str) -> None:
        with self._lock:
            self._known[value] = placeholder
            self._known.move_to_end(value)
            while len(self._known) > MAX_VALUES:
                self._known.popitem(last=False)

    def __call__(self, text: str) -> str:
        with self._lock:
            known = sorted(self._known.items(), key=lambda item: -len(item[0]))
        for value, placeholder in known:
            if value in text:
                text = re.sub(rf"(?<!\w){re.escape(value)}(?!\w)", placeholder, text)
        return _PATH.sub(lambda m: self.placeholder("path", m.group(0)), text)
