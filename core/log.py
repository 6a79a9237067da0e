"""Logging in Stash's stderr protocol, with secrets redacted in one place.

``\x01<c>\x02<message>`` logs at level ``c`` (t, d, i, w, e); ``\x01p\x02<0..1>`` moves a
task's progress bar. Lines are cut well below the 64 KiB that would break Stash's reader.
Every message passes :class:`Redactor` (the Plex token, the Stash cookie) first. With
``plain=True`` the same class writes the drainer's log file (timestamp and level name).
"""

from __future__ import annotations

import _thread  # threading's lock without threading's import: the hook logs through this class
import re
import time

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (the hook's path)
if TYPE_CHECKING:
    from collections.abc import Sequence
    from typing import Any, TextIO

# user:password@ in any URL (http://user:pass@host, also inside longer texts)
_URL_CREDENTIALS = re.compile(r"(?i)\b([a-z][a-z0-9+.-]*://)[^\s/?#@]+@")

MAX_LINE_BYTES = 60_000
LEVELS = {"trace": "t", "debug": "d", "info": "i", "warning": "w", "error": "e"}


class Redactor:
    """Replaces every registered secret with ``***`` (longest first), and the user name
    and password of any URL (``http://user:pass@host`` → ``http://***@host``)."""

    def __init__(self) -> None:
        self._secrets: list[str] = []
        self.private: Any = None  # core/privacy.Placeholders when private_logs is on: paths, titles after secrets

    def add(self, secret: str | None) -> None:
        """Register a secret, with its URL-encoded forms (as it would appear in a URL)."""
        if not secret or len(secret) < 4:
            return
        from urllib.parse import quote, quote_plus

        for form in (secret, quote(secret, safe=""), quote_plus(secret)):
            if form not in self._secrets:
                self._secrets.append(form)
        self._secrets.sort(key=len, reverse=True)

    def add_url(self, url: str | None) -> None:
        """Register the password a URL carries (it may appear on its own, e.g. URL-decoded)."""
        if not url:
            return
        from urllib.parse import unquote, urlsplit

        try:
            parts = urlsplit(url)
            password = parts.password
        except ValueError:
            return
        if password:
            self.add(password)
            self.add(unquote(password))

    def __call__(self, text: str) -> str:
        if "@" in text:
            text = _URL_CREDENTIALS.sub(r"\1***@", text)
        for secret in self._secrets:
            if secret in text:
                text = text.replace(secret, "***")
        return text if self.private is None else self.private(text)


ELLIPSIS = "…"


def shortened(text: str, limit: int) -> str:
    """``text`` as it is when it has at most ``limit`` characters, else cut to ``limit``
    with an ellipsis, never inside a character (no combining mark left without its base)
    and with no space before the ellipsis."""
    if len(text) <= limit:
        return text
    import unicodedata

    cut = text[: limit - 1]
    while cut and unicodedata.combining(cut[-1]):
        cut = cut[:-1]
    return cut.rstrip() + ELLIPSIS


def first_ids(ids: Sequence[int], total: int) -> str:
    """Ids as a message lists them: those given, and ", …" when there are ``total`` in all."""
    return ", ".join(map(str, ids)) + (", …" if total > len(ids) else "")


def _cut(line: str) -> str:
    encoded = line.encode("utf-8", "replace")
    if len(encoded) <= MAX_LINE_BYTES:
        return line
    kept = encoded[:MAX_LINE_BYTES].decode("utf-8", "ignore")
    return f"{kept}… [cut, {len(encoded)} bytes]"


class StashLog:
    """Writes log lines and progress to a stream in Stash's protocol."""

    def __init__(self, stream: TextIO, redactor: Redactor | None = None, plain: bool = False) -> None:
        self.stream = stream
        self.redact = redactor or Redactor()
        self.plain = plain
        self._lock = _thread.allocate_lock()
        self.broken = False

    def _write(self, text: str) -> None:
        if self.broken:
            return
        with self._lock:
            try:
                try:
                    self.stream.write(text)
                except UnicodeEncodeError:
                    # A stream in a legacy encoding: lose the glyphs, not the log
                    # (UnicodeEncodeError is a ValueError, which means "closed" below).
                    encoding = getattr(self.stream, "encoding", None) or "utf-8"
                    self.stream.write(text.encode(encoding, "backslashreplace").decode(encoding))
                self.stream.flush()
            except (BrokenPipeError, ValueError, OSError):
                # Stash closed its end (a line too long, or it stopped reading):
                # logging must never take the plugin down with it.
                self.broken = True

    def log(self, level: str, message: object) -> None:
        code = LEVELS[level]
        # Lone surrogates (undecodable file names) become \udcXX, so lines measure and encode as UTF-8.
        text = self.redact(str(message)).encode("utf-8", "backslashreplace").decode("utf-8")
        lines = [line for line in text.splitlines() if line.strip()] or ["(empty message)"]
        if self.plain:
            stamp = time.strftime("%Y-%m-%d %H:%M:%S")
            out = "".join(f"{stamp} {level.upper():7} {_cut(line)}\n" for line in lines)
        else:
            out = "".join(f"\x01{code}\x02{_cut(line)}\n" for line in lines)
        self._write(out)

    def debug(self, message: object) -> None:
        self.log("debug", message)

    def info(self, message: object) -> None:
        self.log("info", message)

    def warning(self, message: object) -> None:
        self.log("warning", message)

    def error(self, message: object) -> None:
        self.log("error", message)

    def report(self, message: object, level: str = "info") -> None:
        """A line of the task's result: in Stash's log (where a task's reply is never shown);
        the command line prints the result itself and leaves these out (app/terminal.py)."""
        self.log(level, message)

    def progress(self, fraction: float, detail: str = "") -> None:
        """Stash's task bar (``detail``, e.g. the rate, is for the command line's bar)."""
        value = min(1.0, max(0.0, float(fraction)))
        if not self.plain:
            self._write(f"\x01p\x02{value:.4f}\n")


def capture_library_logs(target: StashLog, names: tuple[str, ...] = ("plexapi", "StashLogger", "urllib3")) -> None:
    """Send the named libraries' log records through ``target`` (and so the redactor) at
    debug level: our own line says what failed and what to do; theirs only add detail.
    ``logging`` is imported here, not by the module: a hook never needs it."""
    import logging

    class ForwardHandler(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            try:
                message = f"[{record.name}] {record.levelname.lower()}: {record.getMessage()}"
            except Exception:  # a library's bad format string must not crash us
                message = f"[{record.name}] {record.levelname.lower()}: {record.msg!r}"
            target.log("debug", message)

    handler = ForwardHandler(level=logging.INFO)
    for name in names:
        logger = logging.getLogger(name)
        logger.handlers = [handler]
        logger.propagate = False
