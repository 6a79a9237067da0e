"""The plugin's entry point behind ``Stash2Plex.py`` (see its docstring).

It lives in a module, not in the script Stash starts: Python compiles a script on every
run but caches a module's bytecode, and Stash starts the script once per hook.
"""

from __future__ import annotations

import json
import sys

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (the hook's path)
if TYPE_CHECKING:
    from collections.abc import Callable
    from pathlib import Path
    from typing import Any, TextIO

    from core.log import StashLog


def _reply(stdout: TextIO, output: Any, error: str | None) -> None:
    stdout.write(json.dumps({"output": output, "error": error}, ensure_ascii=False, default=str))
    stdout.flush()


def _plugin_dir() -> Path:
    from pathlib import Path  # not on the hook's path

    return Path(__file__).resolve().parent.parent


def _packages(log: StashLog) -> None:
    """Make the runtime packages importable (app/bootstrap.py), or raise DependencyError."""
    from app.bootstrap import ensure_dependencies

    ensure_dependencies(_plugin_dir(), log)


def main(stdin: TextIO, stdout: TextIO, stderr: TextIO, env: dict[str, str], argv: list[str] | None = None) -> int:
    """Run one invocation; returns the process exit status.

    No arguments: a plugin run by Stash (stdin JSON, one reply on stdout). ``drain``:
    the detached background drainer. Anything else: the standalone command line.
    """
    argv = argv or []
    raw = None
    from core.log import Redactor, StashLog

    # Stash's log protocol (\x01e\x02…) is for Stash; a person at a terminal gets plain lines.
    log = StashLog(stderr, Redactor(), plain=_terminal(stderr))
    if not argv and not _terminal(stdin):
        raw = stdin.read()
        hooked = _hook(raw, stdout, env, log)
        if hooked is not None:
            return hooked  # a hook's run, its reply written
    if not argv and raw is None:
        # A person typed the bare command: Stash always pipes a document in. Waiting
        # silently on the keyboard would look like a hang, so show the commands.
        stderr.write("Stash runs this file with a JSON document on stdin; from a shell, give a command:\n\n")
        stderr.flush()
        _cli(["--help"], stdout, stderr, env)
        return 2
    if argv[:1] == ["drain"]:
        if _packages_missing(StashLog(stderr, Redactor(), plain=True)):  # stderr is data/drainer.log
            return 1
        from app.drainer import main as drain

        return drain(stdin, stderr, env)
    if argv:
        return _cli(argv, stdout, stderr, env)
    return _answer(stdout, log, lambda: _task(raw or "", env, log))


def _hook(raw: str, stdout: TextIO, env: dict[str, str], log: StashLog) -> int | None:
    """A hook's whole run (hooks/lane.py), its reply written; None when stdin is a task's.
    Only a hook that finds no drainer imports more than the lane (``_start_drainer``)."""
    from hooks import lane

    parsed: list = []

    def work() -> Any:
        found = lane.parse(raw)
        if found is None:
            return None
        parsed.append(found)
        connection, context = found
        log.redact.add(connection["ApiKey"])
        log.redact.add((connection["SessionCookie"] or {}).get("Value"))
        return lane.run(connection, context, env, log, lambda conn, folder: _start_drainer(conn, folder, log))

    code = _answer(stdout, log, work, reply_none=False)
    return code if code != 0 or parsed else None


def _cli(argv: list[str], stdout: TextIO, stderr: TextIO, env: dict[str, str]) -> int:
    from app.terminal import TerminalLog

    if _packages_missing(TerminalLog(stderr)):
        return 1
    from app.cli import main as cli

    return cli(argv, stdout, stderr, env, _plugin_dir())


def _packages_missing(log: StashLog) -> bool:
    """Make the runtime packages importable; True when they are not (the log says why)."""
    from core.errors import DependencyError

    try:
        _packages(log)
    except DependencyError as exc:
        log.error(str(exc))
        return True
    return False


def _terminal(stream: TextIO) -> bool:
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError, OSError):  # a StringIO in tests, or a closed stream
        return False


def _start_drainer(connection: dict[str, Any], data_dir: str, log: StashLog) -> None:
    """The drainer a hook starts needs the packages the hook itself never imports: installed
    now (a first run), or the reply says what to run (app/bootstrap.py); then started."""
    from pathlib import Path

    from app.root import start_drainer

    _packages(log)
    start_drainer(connection, Path(data_dir))


def _task(raw: str, env: dict[str, str], log: StashLog) -> Any:
    """A task's run by Stash: stdin parsed, the runtime packages in place, dispatched."""
    from validation.plugin_input import parse_plugin_input

    plugin_input = parse_plugin_input(raw)
    _packages(log)
    from app.root import App
    from core.log import capture_library_logs
    from tasks import run_task

    app = App(plugin_input.server_connection, env, log)
    app.options["dry_run"] = plugin_input.dry_run
    try:
        capture_library_logs(log)
        return run_task(plugin_input.mode, app, plugin_input.params)
    finally:
        app.close()


def _answer(stdout: TextIO, log: StashLog, work: Callable[[], Any], reply_none: bool = True) -> int:
    """Run ``work`` and write exactly one reply: its output, or the error in words (a
    traceback only for a bug of ours). ``reply_none=False``: an output of None writes nothing."""
    try:
        output = work()
    except Exception as exc:
        from sync_queue.sqlite import in_words

        error = in_words(exc)
        if error is not None:
            message = log.redact(str(error))
            log.error(message)
        else:  # a bug: the reply names it, the log holds the traceback
            import traceback

            log.error(f"unexpected {type(exc).__name__}: {exc}\n{traceback.format_exc()}")
            message = log.redact(
                f"Stash2Plex failed unexpectedly: {type(exc).__name__}: {exc} (details in the Stash log)"
            )
        _reply(stdout, None, message)
        return 1
    if output is not None or reply_none:
        _reply(stdout, output, None)
    return 0


def utf8_stdio() -> None:
    """Stash writes stdin and reads stdout/stderr as UTF-8, whatever our locale says.

    Python otherwise uses the locale's encoding for pipes (the ANSI code page on
    Windows, ASCII under a non-UTF-8 POSIX locale): a ``PluginDir`` with an accent
    would be misread and a non-ASCII reply would fail to encode.
    """
    for stream, errors in ((sys.stdin, "replace"), (sys.stdout, "replace"), (sys.stderr, "backslashreplace")):
        reconfigure = getattr(stream, "reconfigure", None)
        if reconfigure is not None:
            reconfigure(encoding="utf-8", errors=errors)
