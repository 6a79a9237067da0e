"""The composition root: builds every part from the plugin input and settings.

Nothing else constructs queues, clients or the worker. Parts are created on first
use, so a hook (which needs only the queue and the drainer lock) never imports
requests, plexapi or stashapi.
"""

from __future__ import annotations

import contextlib
import functools
import json
import math
import os
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar, cast

from core.errors import ConfigError, DataFileError, Stash2PlexError
from core.log import StashLog
from core.platform import HeldLock, is_locked, spawn_detached
from sync_queue import spool
from sync_queue.owner import data_folder
from sync_queue.queue import JobQueue
from validation.plugin_input import ServerConnection

if TYPE_CHECKING:
    import random

    from core.privacy import Placeholders
    from plex.client import PlexClient
    from plex.desired import Choices
    from plex.index import LibraryIndex
    from plex.notifications import Notification
    from plex.sessions import SessionAccounts
    from stash.client import StashClient
    from sync_queue.dlq import DeadLetterQueue
    from sync_queue.health import HealthFile
    from sync_queue.ledger import Ledger
    from sync_queue.plays import PlayJournal
    from sync_queue.stats import StatsStore
    from validation.config import Settings
    from worker.breaker import CircuitBreaker
    from worker.drift import DriftWatch
    from worker.listen import PlexListener
    from worker.notices import RunNotices
    from worker.plays import PlayImport
    from worker.ratings import RatingsBack
    from worker.resume import ResumeBack
    from worker.sync import Syncer
    from worker.viewers import Viewers
    from worker.waits import PlexWaits
    from worker.watching import Watching
    from worker.worker import Worker

T = TypeVar("T")

PLUGIN_DIR = Path(__file__).resolve().parent.parent  # the checkout, or the folder Stash installed us in
ENTRY_SCRIPT = PLUGIN_DIR / "Stash2Plex.py"
HANDOVER_WAIT_S = 900.0
DRAINER_LOG_MAX_BYTES = 5_000_000
WATCH_LOCK = "watch.lock"
WATCH_SINCE_KEY = "watch_started_at"  # ledger meta: when the running ``watch`` started (epoch s)
ENV_PREFIX = "STASH2PLEX_"  # a setting's environment variable on the command line: its name in capitals after it
STASH_UI, COMMAND_LINE = "stash", "cli"  # where a run's messages are read


def env_name(setting: str) -> str:
    return ENV_PREFIX + setting.upper()


def flag(setting: str) -> str:
    return "--" + setting.replace("_", "-")


def where_to_set(setting: str, surface: str) -> str:
    """Where the user changes ``setting``, in the words of the place they read the message."""
    if surface == COMMAND_LINE:
        if not setting:
            return f"give the setting as a --flag or {ENV_PREFIX} variable (Stash2Plex.py --help)"
        return f"{flag(setting)} or {env_name(setting)}"
    from validation.config import SETTINGS_PAGE

    return SETTINGS_PAGE


def fix_for(error: BaseException, surface: str) -> str:
    """What to do about an error that stopped background sync ("" when its message says it)."""
    from core.errors import ConfigError, PlexAuthError, PlexUnavailable

    if isinstance(error, PlexAuthError):
        return f"check plex_token: {where_to_set('plex_token', surface)}"
    if isinstance(error, ConfigError):
        return where_to_set("", surface)
    if isinstance(error, PlexUnavailable):
        return f"check that Plex is running and plex_url is right ({where_to_set('plex_url', surface)}); jobs wait"
    if not isinstance(error, Stash2PlexError):
        return "details in the data folder's drainer.log"
    return ""


def rotate(path: Path, max_bytes: int) -> None:
    """Keep one older copy (``<name>.1``) once a log passes ``max_bytes``, so it never grows without end."""
    try:
        if path.stat().st_size > max_bytes:
            os.replace(path, path.with_name(path.name + ".1"))
    except OSError:
        pass  # absent, or in use on Windows: try again at the next start


def start_drainer(
    connection: dict, data_dir: Path, settings_overrides: dict[str, str] | None = None, surface: str = STASH_UI
) -> None:
    """Start ``Stash2Plex.py drain`` detached (core/platform.py), the Stash connection and
    the run's settings on its stdin pipe, its output in ``drainer.log``."""
    rotate(data_dir / "drainer.log", DRAINER_LOG_MAX_BYTES)
    payload = {
        "server_connection": connection,
        "data_dir": str(data_dir),
        "settings_overrides": settings_overrides or {},
        "surface": surface,
    }
    spawn_detached([sys.executable, str(ENTRY_SCRIPT), "drain"], json.dumps(payload).encode(), data_dir / "drainer.log")


def _fingerprint(value: object) -> str:
    """A short hash of settings (secrets included, so it is only ever a hash)."""
    import hashlib  # not on the hook's path

    text = json.dumps(value, sort_keys=True, default=str)
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:32]


def part(build: Callable[[App], T]) -> Callable[[App], T]:
    """A part of the App: built on its first use, kept until ``close``."""

    @functools.wraps(build)
    def get(app: App) -> T:
        if build.__name__ not in app._parts:
            app._parts[build.__name__] = build(app)
        return cast(T, app._parts[build.__name__])

    return get


class App:
    def __init__(
        self,
        connection: ServerConnection,
        env: dict[str, str],
        log: StashLog,
        data_dir: Path | None = None,
        settings_overrides: dict[str, str] | None = None,
        surface: str = STASH_UI,
        log_read: bool = True,
    ) -> None:
        self.connection = connection
        self.surface = surface
        self.log_read = log_read  # the user reads this run's log (not the drainer's file)
        self.env = env
        self.log = log
        self.settings_overrides = dict(settings_overrides or {})  # the command line's flags and variables
        self.data_dir = data_dir or Path(data_folder(connection.PluginDir, connection.Dir, env))
        self.queue_dir = self.data_dir / spool.QUEUE_FOLDER
        self.lock_path = self.data_dir / spool.LOCK_FILE
        # A task asking the drainer to hand over holds this lock while it waits: the
        # request dies with the task, whatever kills it (never a file's age).
        self.handover_path = self.data_dir / "drainer.handover.lock"
        self.nudge_path = self.data_dir / spool.NUDGE_FILE
        self.watch_lock_path = self.data_dir / WATCH_LOCK  # held by a running ``watch`` (app/watch.py)
        self._settings_print: str | None = None
        self._parts: dict[str, object] = {}
        # How this run was asked for: dry_run, scene_id (inspect), full_reply (the command line).
        self.options: dict[str, object] = {}
        log.redact.add(connection.cookie_value)
        log.redact.add(connection.ApiKey)
        log.redact.add(self.settings_overrides.get("plex_token"))

    # -- the hook's parts -----------------------------------------------------------
    @part
    def producer_queue(self) -> JobQueue:
        return JobQueue(self.queue_dir, consumer=False)

    def drainer_running(self) -> bool:
        return is_locked(self.lock_path)

    def watch_state(self) -> dict[str, Any]:
        """Whether a ``watch`` runs on this data folder now, and since when (ISO, local time)."""
        from sync_queue.stats import iso_local

        if not is_locked(self.watch_lock_path):
            return {"running": False, "since": None}
        return {"running": True, "since": iso_local(self.ledger().meta(WATCH_SINCE_KEY))}

    def ensure_drainer(self) -> bool:
        """Start a detached background drainer unless one holds the lock; a running one is
        nudged to check that it still works with the current settings."""
        if self.drainer_running():
            spool.nudge(str(self.data_dir))  # it then compares the settings (also every SETTINGS_CHECK_S)
            return False
        start_drainer(self.connection.model_dump(), self.data_dir, self._drainer_overrides(), self.surface)
        return True

    def _drainer_overrides(self) -> dict[str, str]:
        """The command line's settings a background drainer keeps: only those Stash has not
        saved. The drainer outlives this run and serves every hook, so a flag that differs
        from a saved value (a mistyped ``--plex-url``; a value saved under an old name counts)
        stays with this run; the drainer uses what is saved (and, when Stash cannot say, nothing of this run)."""
        from validation.legacy import new_name, saved_names

        if not self.settings_overrides:
            return {}
        try:
            saved = saved_names(self.stash().plugin_settings())  # an old name's value is a saved value too
        except Stash2PlexError:
            return {}
        return {k: v for k, v in self.settings_overrides.items() if new_name(k) not in saved}

    def nudged_at(self) -> float:
        try:
            return self.nudge_path.stat().st_mtime
        except OSError:
            return 0.0

    # -- the drainer lock -------------------------------------------------------------
    def handover_requested(self) -> bool:
        """A task is waiting for the drainer lock right now (it holds the handover lock)."""
        return is_locked(self.handover_path)

    @contextlib.contextmanager
    def consumer(self, lock: HeldLock | None = None, wait_s: float = HANDOVER_WAIT_S) -> Iterator[JobQueue]:
        """Become the one consumer: take the drainer lock (asking a running drainer
        to hand over), open the queue with auto_resume, close it at the end and let go
        of the lock, then start the drainer a hook meanwhile would have (``let_go``). A ``lock`` given
        (the drainer's, held) stays held: its holder lets go, and looks once more (app/drainer.py)."""
        held = lock or HeldLock(self.lock_path)
        if not held.acquire(patience=0.5):
            self.log.info("a background drainer is working; asking it to hand over")
            self._wait_for_handover(held, wait_s)
        try:
            queue = JobQueue(self.queue_dir, consumer=True)
            try:
                yield queue
            finally:
                queue.close()
        finally:
            if lock is None:  # only the hooks' lines: jobs a task left (a bad token) start no drainer
                self.let_go(held, spool_only=True)

    def let_go(self, lock: HeldLock, spool_only: bool = False, start: bool = True) -> bool:
        """Let go of the drainer lock, then look once more whether work waits (a hook that
        found the lock held only nudged: docs/architecture.md, the hook's step 5) and, if so,
        ``start`` a drainer. ``spool_only``: the hooks' spool alone, else every pending job
        (True when the queue cannot even be read). The drainer itself goes on instead (start=False)."""
        lock.release()
        waits = spool.holds_work(str(self.queue_dir)) if spool_only else self.work_waits()
        if waits and start:
            self.ensure_drainer()
        return waits

    def work_waits(self) -> bool:
        """Whether jobs (or the hooks' spool) wait; True when the queue cannot even be read."""
        import sqlite3

        try:
            return self.producer_queue().pending() > 0
        except (Stash2PlexError, sqlite3.Error, OSError):
            return True

    def take_over(self, start_drainer: bool = True) -> None:
        """The public Stash2Plex plugin's waiting jobs and dead letters, once, at the start of
        every run but a hook's (sync_queue/predecessor.py); a drainer syncs the jobs. The line
        saying what was taken reaches Stash's log (from a drainer, with the next hook). Its
        files unreadable: said, and our own sync goes on."""
        import sqlite3

        from sync_queue import predecessor

        try:
            if not predecessor.present(self.data_dir):
                return
            line = predecessor.take_over(self.data_dir, self.producer_queue(), self.dlq(), self.ledger())
        except (sqlite3.Error, DataFileError) as exc:
            self.log.warning(f"the data of {predecessor.ORIGIN} in {self.data_dir} could not be read: {exc}")
            return
        if line:
            self.log.warning(line)
            if not self.log_read:  # the drainer's log is a file: the next hook says it in Stash's log
                self.health().update(**{predecessor.HEALTH_KEY: {"reason": line, "told": False}})
            if start_drainer and self.producer_queue().pending():
                self.ensure_drainer()

    def _wait_for_handover(self, lock: HeldLock, wait_s: float) -> None:
        deadline = time.monotonic() + wait_s
        request = HeldLock(self.handover_path)
        try:
            if not request.acquire(patience=wait_s):
                raise Stash2PlexError(f"another task waited for the drainer for {wait_s:.0f} s; try again later")
            if not lock.acquire(patience=max(0.0, deadline - time.monotonic())):
                raise Stash2PlexError(
                    f"the background drainer did not hand over within {wait_s:.0f} s; try again later"
                )
        finally:
            request.release()

    # -- the full set -------------------------------------------------------------
    @part
    def stash(self) -> StashClient:
        from stash.client import IMAGE_DEADLINE_S, StashClient

        deadline = self.seconds("STASH2PLEX_COVER_DEADLINE_S", IMAGE_DEADLINE_S)
        client = StashClient(self.connection, logger=self.log, image_deadline_s=deadline)
        self.log.redact.add(client.api_key)
        return client

    def _saved_settings(self) -> dict[str, Any]:
        """The settings saved in Stash, under the command line's flags and variables."""
        from validation.legacy import merge

        return merge(self.stash().plugin_settings(), self.settings_overrides)

    @part
    def settings(self) -> Settings:
        from core.notify import secrets_of
        from validation.config import in_stash, load_settings

        saved = self._saved_settings()
        self._settings_print = _fingerprint(saved)
        on_command_line = self.surface == COMMAND_LINE
        settings = load_settings(
            saved,
            missing=(lambda name: f"give it with {where_to_set(name, COMMAND_LINE)}") if on_command_line else in_stash,
        )
        self.stash().read_photos(settings.performer_photos)  # image_path costs Stash a look-up
        self._set_private(settings.private_logs)
        self.health().update(private_logs=True if settings.private_logs else None)  # for queue_status
        self.log.redact.add(settings.plex_token)
        self.log.redact.add_url(settings.plex_url)
        for url in settings.notify_urls:
            for secret in secrets_of(url):
                self.log.redact.add(secret)
        for warning in (*settings.adopted.warnings, *settings.problems):
            self.log.warning(warning)
        return settings

    def settings_changed(self) -> bool:
        """Whether the settings saved in Stash differ from those this App runs with (one
        small GraphQL request; False when Stash cannot be asked right now)."""
        if self._settings_print is None:
            return False
        try:
            return _fingerprint(self._saved_settings()) != self._settings_print
        except Stash2PlexError:
            return False

    @part
    def private(self) -> Placeholders | None:
        """The placeholders when private_logs is on (then also in the log's redactor), else None.

        For tasks that read no other setting (queue_status stays local, Stash is not
        asked): the flag or variable, else the value the last run that read the settings
        left in sync_health.json."""
        from validation.config import boolean

        value = self.settings_overrides.get("private_logs")
        if value is None:
            value = self.health().state().get("private_logs")
        try:
            on = value is not None and boolean(value)
        except ValueError:
            on = False
        return self._set_private(on)

    def _set_private(self, on: bool) -> Placeholders | None:
        from core.privacy import Placeholders, load_key

        if on and self.log.redact.private is None:
            self.log.redact.private = Placeholders(load_key(self.data_dir))
        return self.log.redact.private

    @part
    def health(self) -> HealthFile:
        from sync_queue.health import HealthFile

        return HealthFile(self.data_dir)

    @part
    def ledger(self) -> Ledger:
        from sync_queue.ledger import Ledger

        ledger = Ledger(self.data_dir)
        notice = ledger.open()
        if notice:
            self.log.warning(f"{notice}; the next sync writes every scene to Plex again")
        return ledger

    @part
    def dlq(self) -> DeadLetterQueue:
        from sync_queue.dlq import DeadLetterQueue

        return DeadLetterQueue(self.data_dir)

    @part
    def stats(self) -> StatsStore:
        from sync_queue.stats import StatsStore

        return StatsStore(self.data_dir)

    @part
    def breaker(self) -> CircuitBreaker:
        from worker.breaker import BreakerPolicy, BreakerStore, CircuitBreaker

        policy = BreakerPolicy(recovery=self.seconds("STASH2PLEX_BREAKER_RECOVERY_S", 60.0))
        settings = self.settings()
        breaker = CircuitBreaker(BreakerStore(self.data_dir / "breaker.json"), policy)
        breaker.state()
        if breaker.store.warning:  # a corrupt state file is reset, and said so
            self.log.warning(breaker.store.warning)
        if breaker.store.bind(_fingerprint([settings.plex_url, settings.plex_token])):
            self.log.info("plex_url or plex_token changed: the circuit breaker starts closed again")
        return breaker

    def seconds(self, name: str, default: float, zero_ok: bool = False) -> float:
        """A number of seconds from the environment variable ``name`` (``default`` when unset;
        ``zero_ok``: 0 is a value, e.g. an idle drainer that exits at once)."""
        text = self.env.get(name) or ""
        try:
            value = float(text) if text else default
        except ValueError:
            value = -1.0
        if zero_ok and value == 0:
            return 0.0
        if not 0 < value < 86400:
            raise ConfigError(f"environment variable {name} must be a number of seconds (e.g. 60), got {text!r}")
        return value

    def client_id(self) -> str:
        import uuid  # here, not at import time: not on the hook's path

        ledger = self.ledger()
        value = ledger.meta("client_id")
        if not value:
            value = str(uuid.uuid4())
            ledger.set_meta("client_id", value)
        return value

    @part
    def plex(self) -> PlexClient:
        from plex.client import PlexClient

        settings = self.settings()
        return PlexClient(settings.plex_url, settings.plex_token, self.client_id())

    @part
    def index(self) -> LibraryIndex:
        from plex.index import LibraryIndex

        settings = self.settings()
        return LibraryIndex(self.plex(), self.ledger(), settings.plex_libraries, settings.path_map)

    @part
    def syncer(self) -> Syncer:
        from worker.sync import Syncer

        return Syncer(self.plex(), self.index(), self.ledger(), self.stash(), self.settings(), self.log, self.choices())

    @part
    def choices(self) -> Choices:
        """The settings that shape what is written, with the tag filters' children from Stash."""
        from plex.desired import Choices
        from worker.photos import photo_base

        settings = self.settings()
        filters = settings.hide_tags or settings.skip_tags
        photos = photo_base(settings, self.stash(), self.health(), self.log, self.log_read)
        return Choices.from_tree(settings, self.stash().tag_tree() if filters else None, photos)

    @part
    def waits(self) -> PlexWaits:
        """The jobs waiting for Plex to have their file; the first one starts the listener."""
        from worker.listen import WakeWaitingJobs
        from worker.waits import PlexWaits

        waits = PlexWaits(self.settings().path_map)
        wake = WakeWaitingJobs(self.plex(), self.index(), waits, self.log)
        waits.on_wait = self.plex_listener(wake, fold_at=WakeWaitingJobs.FOLD_AT).ensure_started
        return waits

    def plex_listener(self, handle: Callable[[Notification], None], fold_at: int | None = None) -> PlexListener:
        """Plex's notification websocket, kept open (``worker/listen.py``); ``handle(event)``
        acts on each event, after ``viewers`` heard it (``fold_at``: a section's items past that
        many a second come as one section event). Started by its first user; closed with the App."""
        from functools import partial

        from plex.notifications import Connection
        from worker.listen import PlexListener

        if "listener" not in self._parts:
            viewers = self.viewers()

            def heard(event: Notification) -> None:
                viewers.saw(event)
                handle(event)

            self._parts["listener"] = PlexListener(
                partial(Connection, self.plex()), heard, self.log, self.breaker(), fold_at=fold_at, rng=self._rng()
            )
        return cast("PlexListener", self._parts["listener"])

    @part
    def viewers(self) -> Viewers:
        """Whether someone watches Plex (``worker/viewers.py``): the listener's frames while it
        is connected, else Plex's sessions read during bulk runs."""
        from functools import partial

        from plex.sessions import playing_sessions
        from worker.viewers import Viewers

        def listening() -> bool:
            listener = cast("PlexListener | None", self._parts.get("listener"))
            return listener is not None and listener.status.connected

        return Viewers(partial(playing_sessions, self.plex()), listening)

    @part
    def play_journal(self) -> PlayJournal:
        from sync_queue.plays import PlayJournal

        return PlayJournal(self.data_dir)

    @part
    def play_import(self) -> PlayImport:
        """Plex plays into Stash's play history, each once (``worker/plays.py``)."""
        from worker.plays import PlayImport

        lock = self.data_dir / "plays.lock"
        return PlayImport(self.plex(), self.stash(), self.ledger(), self.play_journal(), lock, self.log)

    @part
    def watch_handler(self) -> Watching:
        """What the resident ``watch`` process does with each Plex event and on its timer
        (``worker/watching.py``)."""
        from worker.watching import Watching

        parts = (self.play_import, self.ratings_back, self.resume_back, self.session_accounts, self.drift_watch)
        return Watching(self.settings(), *parts, self.log)

    @part
    def resume_back(self) -> ResumeBack:
        """The owner's Plex resume points into Stash (``worker/resume.py``)."""
        from worker.resume import ResumeBack

        return ResumeBack(self.plex(), self.stash(), self.ledger(), self.index(), self.log)

    @part
    def session_accounts(self) -> SessionAccounts:
        """Which Plex account each playback session is (``plex/sessions.py``)."""
        from plex.sessions import SessionAccounts

        return SessionAccounts(self.plex())

    @part
    def drift_watch(self) -> DriftWatch:
        """Plex-side changes to items we own, checked and repaired as reconcile does (``worker/drift.py``)."""
        from worker.drift import DriftWatch
        from worker.reconcile import Reconciler

        reconciler = Reconciler(self.syncer(), self.ledger(), self.settings())
        return DriftWatch(
            reconciler, self.ledger(), self.stash(), lambda: HeldLock(self.lock_path), self.log, self.let_go
        )

    @part
    def ratings_back(self) -> RatingsBack:
        """Plex ratings into Stash (``worker/ratings.py``)."""
        from worker.ratings import RatingsBack

        return RatingsBack(self.ledger(), self.plex(), self.stash(), self.log, self.index(), self.play_journal())

    def worker(self, queue: JobQueue, probe_now: bool = False, listen: bool = False) -> Worker:
        """The worker; ``probe_now`` for a task the user started (Plex is probed at once);
        ``listen``: jobs waiting for Plex to have their file go when Plex announces it (the drainer)."""
        from worker.worker import Parts, Worker

        parts = Parts(
            queue,
            self.dlq(),
            self.ledger(),
            self.stash(),
            self.syncer(),
            self.breaker(),
            self.stats(),
            self.log,
            self.notices(),
            self.waits() if listen else None,
            self.viewers(),
            rng=self._rng(),
        )
        return Worker(parts, concurrency=self.settings().plex_concurrency, probe_now=probe_now)

    def _rng(self) -> random.Random | None:
        """The retries' randomness; ``STASH2PLEX_RANDOM_SEED`` makes it repeatable (tests)."""
        import random

        seed = self.env.get("STASH2PLEX_RANDOM_SEED")
        return random.Random(int(seed)) if seed and seed.isdigit() else None

    @part
    def notices(self) -> RunNotices:
        """Outages and dead-lettered jobs: the health file and, when URLs are set, notifications."""
        from core.errors import PlexUnavailable
        from core.notify import Notifier
        from worker.notices import RunNotices

        settings = self.settings()
        notifier = Notifier(settings.notify_urls, self.log) if settings.notify_urls else None
        minutes = settings.notify_plex_down_minutes
        down_after_s = math.inf if minutes is None else minutes * 60  # None: a bad value turned the notice off
        return RunNotices(self.health(), notifier, down_after_s, fix_for(PlexUnavailable(""), self.surface))

    def close(self) -> None:
        for part in self._parts.values():
            close = getattr(part, "close", None)
            if callable(close):
                close()
        self._parts.clear()
