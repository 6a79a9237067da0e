"""Notifications to a plain webhook or an Apprise-style URL, for users who are away.

Why not Apprise itself: it is the well-kept library for this, but the runtime package
list is fixed (requirements.txt: stashapi, plexapi, persist-queue, pydantic, tenacity,
requests), so this module delivers a documented subset of Apprise's URL schemes with
``requests``, written as Apprise reads them:

* ``http://…`` / ``https://…``: a plain webhook; POST of the JSON
  ``{"version": "1.0", "title", "message", "type"}`` (Apprise's ``json://`` body).
* ``json://host[:port]/path`` / ``jsons://…``: the same body to ``http(s)://host/path``.
* ``ntfy://topic`` (ntfy.sh), ``ntfy://host[:port]/topic`` / ``ntfys://…``: ntfy's
  JSON publish (POST ``{"topic", "title", "message"}`` to the server's root).
* ``gotify://host[:port][/path]/token`` / ``gotifys://…``: POST to ``…/message``
  with the token in ``X-Gotify-Key``.
* ``discord://webhook_id/webhook_token``: POST ``{"content"}`` to Discord's webhook.

``user:password@`` in any of them is sent as HTTP basic authentication. A URL is a
secret (tokens live in it): it is never logged; messages name ``scheme://host`` only.

Delivery runs in daemon threads with a timeout per request; a receiver that is down,
slow or answering errors costs one warning line and never delays or changes a sync.
Nothing here is imported by the hook.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import unquote, urlsplit

TIMEOUT_S = 5.0
SCHEMES = ("http", "https", "json", "jsons", "ntfy", "ntfys", "gotify", "gotifys", "discord")
INFO, WARNING, FAILURE, SUCCESS = "info", "warning", "failure", "success"


@dataclass(frozen=True)
class Request:
    label: str  # scheme://host[:port], safe to log
    url: str = field(repr=False)
    json: dict[str, Any] = field(repr=False)
    headers: dict[str, str] = field(default_factory=dict, repr=False)
    auth: tuple[str, str] | None = field(default=None, repr=False)


def split_urls(text: str | None) -> list[str]:
    """Several URLs separated by spaces, commas or new lines (as Apprise accepts them)."""
    return [part for part in (text or "").replace(",", " ").split() if part]


def problem(url: str, position: int) -> str | None:
    """Why ``url`` cannot be used, without repeating it (it holds secrets), or None."""
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 - raises ValueError for a bad port
    except ValueError:
        return f"entry {position} is not a URL"
    scheme = parts.scheme.lower()
    if scheme not in SCHEMES:
        shown = f"'{scheme}://'" if scheme else "no scheme"
        return f"entry {position} has {shown}; use one of {', '.join(s + '://' for s in SCHEMES)}"
    if not parts.hostname:
        return f"entry {position} ({scheme}://) has no host"
    if scheme == "discord" and len([p for p in parts.path.split("/") if p]) != 1:
        return f"entry {position}: write discord://webhook_id/webhook_token"
    if scheme.startswith("gotify") and not [p for p in parts.path.split("/") if p]:
        return f"entry {position}: write gotify://host/token"
    return None


def secrets_of(url: str) -> list[str]:
    """The parts of ``url`` to redact wherever they might appear."""
    parts = urlsplit(url)
    found = [url, parts.password or ""]
    if parts.scheme.lower() in ("ntfy", "ntfys") and parts.path in ("", "/"):
        found.append(parts.hostname or "")  # ntfy://topic: the topic is the key
    rest = parts.path + (f"?{parts.query}" if parts.query else "")
    if len(rest) >= 8:
        found.append(rest)
    found += [segment for segment in parts.path.split("/") if len(segment) >= 12]
    return [s for s in found if s]


def build(url: str, title: str, message: str, kind: str = INFO) -> Request:
    """The HTTP request that delivers one notification to ``url`` (pure: tests assert it)."""
    parts = urlsplit(url)
    scheme = parts.scheme.lower()
    host = parts.hostname or ""
    netloc = host if ":" not in host else f"[{host}]"
    netloc += f":{parts.port}" if parts.port else ""
    label = f"{scheme}://{netloc}"
    auth = (unquote(parts.username or ""), unquote(parts.password or "")) if parts.username else None
    secure = "https" if scheme in ("https", "jsons", "ntfys", "gotifys") else "http"
    body = {"version": "1.0", "title": title, "message": message, "type": kind}
    segments = [p for p in parts.path.split("/") if p]
    if scheme in ("http", "https"):
        target = url if parts.username is None else url.replace(f"{parts.netloc}", netloc, 1)
        return Request(label, target, body, auth=auth)
    if scheme in ("json", "jsons"):
        query = f"?{parts.query}" if parts.query else ""
        return Request(label, f"{secure}://{netloc}{parts.path or '/'}{query}", body, auth=auth)
    if scheme in ("ntfy", "ntfys"):
        if not segments:  # ntfy://topic: the public ntfy.sh server (the topic is the secret)
            return Request(
                "ntfy://ntfy.sh", "https://ntfy.sh/", {"topic": host, "title": title, "message": message}, auth=auth
            )
        base = "/".join(segments[:-1])
        root = f"{secure}://{netloc}/{base + '/' if base else ''}"
        return Request(label, root, {"topic": segments[-1], "title": title, "message": message}, auth=auth)
    if scheme in ("gotify", "gotifys"):
        base = "/".join(segments[:-1])
        target = f"{secure}://{netloc}/{base + '/' if base else ''}message"
        payload = {"title": title, "message": message, "priority": 8 if kind == FAILURE else 5}
        return Request(label, target, payload, headers={"X-Gotify-Key": segments[-1]}, auth=auth)
    if scheme == "discord":
        target = f"https://discord.com/api/webhooks/{host}/{segments[0]}"
        return Request("discord://webhook", target, {"content": f"**{title}**\n{message}"[:2000]})
    raise ValueError(f"unsupported notification scheme {scheme!r}")


class Notifier:
    """Sends each notification to every URL, in the background, with a timeout."""

    def __init__(self, urls: list[str] | tuple[str, ...], log, timeout: float = TIMEOUT_S) -> None:
        self.urls = list(urls)
        self.log = log
        self.timeout = timeout
        self._threads: list[threading.Thread] = []
        self._session: Any = None  # a requests.Session, made on the first delivery
        self._lock = threading.Lock()

    def send(self, title: str, message: str, kind: str = INFO) -> None:
        redact = getattr(self.log, "redact", lambda text: text)
        title, message = redact(title), redact(message)
        for url in self.urls:
            request = build(url, title, message, kind)
            thread = threading.Thread(target=self._deliver, args=(request,), name="s2p-notify", daemon=True)
            thread.start()
            self._threads.append(thread)

    def _http(self):
        with self._lock:
            if self._session is None:
                import requests

                self._session = requests.Session()
            return self._session

    def _deliver(self, request: Request) -> None:
        import requests

        try:
            response = self._http().post(
                request.url,
                json=request.json,
                headers=request.headers,
                auth=request.auth,
                timeout=(self.timeout, self.timeout),
            )
            if response.status_code >= 400:
                self.log.warning(f"notification to {request.label} failed: it answered {response.status_code}")
            else:
                self.log.debug(f"notification sent to {request.label}")
        except requests.exceptions.Timeout:
            self.log.warning(f"notification to {request.label} failed: no answer within {self.timeout:.0f} s")
        except requests.exceptions.RequestException as exc:
            self.log.warning(f"notification to {request.label} failed: {type(exc).__name__}")

    def close(self, wait_s: float | None = None) -> None:
        """Give deliveries in flight up to ``wait_s`` (default: one timeout) to finish."""
        deadline = time.monotonic() + (self.timeout + 1.0 if wait_s is None else wait_s)
        for thread in self._threads:
            thread.join(max(0.0, deadline - time.monotonic()))
        self._threads = [t for t in self._threads if t.is_alive()]
        if self._session is not None and not self._threads:
            self._session.close()
