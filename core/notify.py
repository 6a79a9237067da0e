"""Notifications through Apprise: every Apprise URL works, Discord's own webhook URL included.

A plain ``http(s)://`` URL Apprise does not recognise is a webhook, sent as ``json(s)://``
(body ``{"version", "title", "message", "type"}``, its query parameters kept). Apprise is
imported by the first sending thread or the health check, never by a hook. Redirects are not
followed (``AppriseAsset(http_redirects=False)``): a token never reaches a host the user did
not name. A URL is a secret: never logged (messages name ``scheme://host``), Apprise's log kept
out of Stash's. Each URL goes in a daemon thread with timeouts: a failure costs one warning.
"""

from __future__ import annotations

import functools
import logging
import threading
import time
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit

TIMEOUT_S = 5.0
INFO, WARNING, FAILURE, SUCCESS = "info", "warning", "failure", "success"  # Apprise's NotifyType values
_WEBHOOK = {"http": "json", "https": "jsons"}


def split_urls(text: str | None) -> list[str]:
    """Several URLs separated by spaces, commas or new lines (as Apprise accepts them)."""
    return [part for part in (text or "").replace(",", " ").split() if part]


def problem(url: str, position: int) -> str | None:
    """Why ``url`` is not even a URL, without repeating it (it holds secrets), or None.
    Cheap (no Apprise): whether Apprise can use it is the health check's question."""
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 - raises ValueError for a bad port
    except ValueError:
        return f"entry {position} is not a URL"
    if not parts.scheme or "://" not in url:
        return f"entry {position} has no scheme; write it as Apprise does, e.g. ntfy://my-topic"
    return None


def label(url: str) -> str:
    """``scheme://host[:port]``: what a message may say about a URL."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    try:
        port = f":{parts.port}" if parts.port else ""
    except ValueError:
        port = ""
    return f"{parts.scheme.lower()}://{host if ':' not in host else f'[{host}]'}{port}"


def unusable(position: int, url: str) -> str:
    """Why notification entry ``position`` is not used (named by its host only)."""
    return (
        f"entry {position} ({label(url)}) is not a URL Apprise can use; "
        "check it against Apprise's documentation of that service"
    )


def secrets_of(url: str) -> list[str]:
    """The parts of ``url`` to redact wherever they might appear."""
    parts = urlsplit(url)
    found = [url, parts.password or ""]
    if parts.path in ("", "/"):
        found.append(parts.hostname or "")  # ntfy://topic, discord://id/token …: the host may be a key
    rest = parts.path + (f"?{parts.query}" if parts.query else "")
    if len(rest) >= 8:
        found.append(rest)
    found += [segment for segment in parts.path.split("/") if len(segment) >= 8]
    return [s for s in found if s and s not in ("localhost", "127.0.0.1")]


def as_webhook(url: str) -> str | None:
    """A plain ``http(s)://`` URL as Apprise's ``json(s)://`` (its query parameters as
    Apprise's ``-name=value`` ones, which it puts back on the URL); None for other schemes.

    >>> as_webhook("https://u:p@h.example:8443/x?k=1")
    'jsons://u:p@h.example:8443/x?-k=1'
    """
    parts = urlsplit(url)
    scheme = _WEBHOOK.get(parts.scheme.lower())
    if scheme is None:
        return None
    query = urlencode([("-" + key, value) for key, value in parse_qsl(parts.query, keep_blank_values=True)])
    return f"{scheme}://{parts.netloc}{parts.path}" + (f"?{query}" if query else "")


def service(url: str, timeout: float = TIMEOUT_S) -> Any:
    """Apprise's plugin object for ``url`` (a plain webhook as json://), or None when
    Apprise cannot use it. Imports Apprise."""
    _reasons()  # before Apprise logs its first line
    import apprise

    asset = apprise.AppriseAsset(http_redirects=False)
    plugin, webhook = apprise.Apprise.instantiate(url, asset=asset), as_webhook(url)
    if plugin is None and webhook is not None:
        plugin = apprise.Apprise.instantiate(webhook, asset=asset)
    if plugin is not None:
        plugin.socket_connect_timeout = plugin.socket_read_timeout = timeout
    return plugin


class _Reasons(logging.Handler):
    """Apprise's log lines, kept per sending thread: the reason a delivery failed."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.lines: dict[int, list[str]] = {}

    def emit(self, record: logging.LogRecord) -> None:
        lines = self.lines.get(record.thread or 0)
        if lines is not None and (record.levelno >= logging.WARNING or "Exception" in record.getMessage()):
            lines.append(record.getMessage())

    @staticmethod
    def summary(lines: list[str], timeout: float) -> str:
        """The cause in our words where it is a network one (Apprise says "a connection
        error" for all of them), else Apprise's warnings (the receiver's answer)."""
        text = " ".join(lines)
        if "timed out" in text or "Timeout" in text:
            return f"no answer within {timeout:.0f} s"
        if "Connection refused" in text or "Errno 111" in text:
            return "connection refused"
        return " ".join(line for line in lines if "Exception" not in line)[:300] or "Apprise reported a failure"


@functools.cache
def _reasons() -> _Reasons:
    """Apprise's log handler, installed once: its lines kept per sending thread, never in
    our log (they may name URLs)."""
    handler, logger = _Reasons(), logging.getLogger("apprise")
    logger.addHandler(handler)
    logger.setLevel(logging.DEBUG)  # its "Socket Exception" lines name the cause
    logger.propagate = False
    return handler


class Notifier:
    """Sends each notification to every URL, in the background, with a timeout."""

    def __init__(self, urls: list[str] | tuple[str, ...], log, timeout: float = TIMEOUT_S) -> None:
        self.urls = list(urls)
        self.log = log
        self.redact = getattr(log, "redact", lambda text: text)
        self.timeout = timeout
        self._threads: list[threading.Thread] = []

    def send(self, title: str, message: str, kind: str = INFO) -> None:
        title, message = self.redact(title), self.redact(message)
        for position, url in enumerate(self.urls, 1):
            args = (position, url, title, message, kind)
            thread = threading.Thread(target=self._deliver, args=args, name="s2p-notify", daemon=True)
            thread.start()
            self._threads.append(thread)

    def _deliver(self, position: int, url: str, title: str, message: str, kind: str) -> None:
        name = label(url)
        try:
            plugin = service(url, self.timeout)
            if plugin is None:
                self.log.warning(f"notification {unusable(position, url)}")
                return
            reasons = _reasons().lines.setdefault(threading.get_ident(), [])
            if plugin.notify(body=message, title=title, notify_type=kind):
                self.log.debug(f"notification sent to {name}")
                return
            why = self.redact(_Reasons.summary(reasons, self.timeout))
            self.log.warning(f"notification to {name} failed: {why}")
        except Exception as exc:  # a bug in a notifier must never reach the sync
            self.log.warning(f"notification to {name} failed: {type(exc).__name__}")
        finally:
            _reasons().lines.pop(threading.get_ident(), None)

    def close(self, wait_s: float | None = None) -> None:
        """Give deliveries in flight up to ``wait_s`` (default: a connect and a read
        timeout, and Apprise's import) to finish."""
        deadline = time.monotonic() + (2 * self.timeout + 2.0 if wait_s is None else wait_s)
        for thread in self._threads:
            thread.join(max(0.0, deadline - time.monotonic()))
        self._threads = [t for t in self._threads if t.is_alive()]
