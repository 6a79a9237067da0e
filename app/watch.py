"""``Stash2Plex.py watch``: listen to Plex for as long as the process lives (a side-car).

Stash starts the plugin per event and keeps nothing running, so the drainer listens
only while it has jobs waiting for Plex. People who run a side-car (Docker, a
service) can keep one process listening instead, the way PlexTraktSync's ``watch``
does: it keeps the connection open (``worker/listen.py``: reconnects with backoff,
respects the shared circuit breaker) and acts on what Plex announces (``App.watch_handler``).
SIGTERM or Ctrl-C ends it; a SIGKILL loses nothing (everything it applied is recorded first).
``watch --once`` reads what Plex recorded since the last look (the timer's work) once and
exits, without listening: for a scheduled job (cron, a timer) instead of a side-car.
A running ``watch`` holds ``watch.lock`` in the data folder (one per folder), so the page and
``health_check`` can say whether one runs, and since when (``App.watch_state``).
"""

from __future__ import annotations

import signal
import threading
import time
from typing import TYPE_CHECKING, Any

from app.root import WATCH_SINCE_KEY
from core.errors import Stash2PlexError
from core.platform import HeldLock, retry_for
from worker.watching import COMES_BACK

if TYPE_CHECKING:
    from app.root import App
    from worker.watching import Watching

STATUS_EVERY_S = 600.0  # one line in the log while nothing happens
POLL_S = 60.0  # Plex's history and ratings are read this often besides the events
# The main thread waits in slices this long. CPython runs a signal's Python handler only in
# the main thread, between bytecodes; the kernel may deliver SIGTERM or SIGINT to any thread
# (here: the listener's), and then nothing wakes a main thread blocked on a lock until its
# timeout. A whole poll interval would keep ``docker stop`` (10 s, then SIGKILL) waiting.
WAKE_S = 0.25


def run(app: App, once: bool = False) -> int:
    """The exit status; our errors go up to the command line, which says them (app/cli.py)."""
    _say_what_comes_back(app, once)
    handler = app.watch_handler()
    if once:
        handler.poll()
        return 0
    lock = HeldLock(app.watch_lock_path)
    if not lock.acquire(patience=0.5):
        since = app.watch_state()["since"] or "a time not recorded"
        app.log.error(f"a watch is running on this data folder already (since {since}); one is enough")
        return 1
    try:
        app.ledger().set_meta(WATCH_SINCE_KEY, time.time())  # the page and health_check show it
        return _listen(app, handler)
    finally:
        lock.release()


def _say_what_comes_back(app: App, once: bool) -> None:
    """Which settings this watch serves; with none of them on, say so (it still repairs the
    items Plex processed again, but brings nothing back to Stash)."""
    settings = app.settings()
    on = [name for name in COMES_BACK if getattr(settings, name)]
    if on:
        app.log.info(f"brings back from Plex: {', '.join(COMES_BACK[name] for name in on)}")
        return
    command = "watch --once" if once else "watch"
    app.log.warning(
        f"{command}: import_plays, import_resume and import_ratings are all off, so nothing comes back from "
        "Plex to Stash (only the items Plex processed again are checked); turn them on in Settings → "
        "Plugins → Stash2Plex (Plex plays, resume points, ratings into Stash)"
    )


def _listen(app: App, handler: Watching) -> int:
    poll_s, stop = app.seconds("STASH2PLEX_WATCH_POLL_S", POLL_S), threading.Event()
    listener = app.plex_listener(handler)
    previous = _on_sigterm(stop)
    listener.ensure_started()
    app.log.info("watching Plex (Ctrl-C or SIGTERM stops)")
    polls = 0
    try:
        handler.poll()  # what happened while nothing watched
        while not retry_for(stop.is_set, poll_s, WAKE_S, sleep=stop.wait):  # in slices: see WAKE_S
            if app.settings_changed():  # a new token, plex_url or switch: parts built again from them
                try:
                    handler, listener = _start_over(app)
                except Stash2PlexError as exc:  # each look says so until the settings are fixed
                    app.log.error(f"the changed settings cannot be used yet: {exc}")
            handler.poll()
            polls += 1
            if polls % max(1, int(STATUS_EVERY_S // poll_s)) == 0:
                state = "connected" if listener.status.connected else f"not connected ({listener.status.last_error})"
                app.log.info(f"Plex notifications: {state}; {listener.status.events} event(s) so far")
    except KeyboardInterrupt:
        pass
    finally:
        if previous is not None:
            signal.signal(signal.SIGTERM, previous)
        listener.close()
    app.log.info("stopped watching Plex")
    return 0


def _start_over(app: App) -> tuple[Any, Any]:
    """Every part built again from the settings saved in Stash now, the listener too."""
    app.log.info("the plugin settings changed; watching starts over with them")
    app.close()  # the listener is one of its parts
    handler = app.watch_handler()
    listener = app.plex_listener(handler)
    listener.ensure_started()
    return handler, listener


def _on_sigterm(stop: threading.Event) -> Any:
    """SIGTERM (docker stop, systemd) ends the watch cleanly; None off the main thread."""
    if threading.current_thread() is not threading.main_thread():
        return None
    return signal.signal(signal.SIGTERM, lambda signum, frame: stop.set())
