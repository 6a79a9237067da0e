"""The standalone command line: every task from a shell, outside Stash (cron, side-cars, debugging).

``python Stash2Plex.py <command> [options]`` runs the task code Stash runs, reaching Stash
at ``--stash-url`` with its API key. Each setting comes from the first of: the flag, the
environment variable, the setting saved in Stash, the default. The data folder is the
plugin's own by default (one queue, lock and ledger with Stash's hooks). Exit status: 0,
1 when the task failed (the reason on stderr) or ``health_check`` found a problem, 2 for
a command line that cannot be read.
"""

from __future__ import annotations

import argparse
import json
import re
import traceback
from pathlib import Path
from typing import Any, TextIO
from urllib.parse import urlsplit

from app.root import COMMAND_LINE, PLUGIN_DIR, App, env_name, flag
from app.terminal import TerminalLog
from core.log import Redactor, capture_library_logs
from sync_queue.sqlite import in_words
from validation.modes import COMMAND_LINE_MODES, MODES, function
from validation.plugin_input import ServerConnection

DEFAULT_STASH_URL = "http://localhost:9999"
DRY_RUN_TEXT = "write nothing, print the plan (per scene: the Plex item, each field current → new, tags +added/−removed, unmatched scenes and why)"
# The command line's own processes (not tasks: app/main.py runs them): their line in --help, their switch.
PROCESSES = {
    "watch": (
        "stay running and listen to Plex's notifications (a side-car: Docker, a service)",
        "--once",
        "read what Plex recorded since the last look (plays, ratings; each setting that is on) once, "
        "then exit: a scheduled job instead of a side-car",
    ),
    "demo": (
        "the whole story against the bundled emulators (needs requirements-test.txt); demo --serve keeps them up",
        "--serve",
        "then keep the emulators (and Stash's page) up until Ctrl-C, printing their URLs and a command line to try",
    ),
}
ALIASES = {alias: mode for mode in COMMAND_LINE_MODES for alias in MODES[mode].aliases}
DRY_RUN_COMMANDS = tuple(mode for mode in COMMAND_LINE_MODES if MODES[mode].dry_run)


class UsageError(Exception):
    """A value on the command line (or in its environment variables) cannot be used."""


def command_help() -> dict[str, str]:
    """Each command's line in --help: the modes of the registry, their aliases, the processes."""
    lines = {}
    for mode in COMMAND_LINE_MODES:
        lines[mode] = MODES[mode].help
        lines.update((alias, f"the same as {mode}") for alias in MODES[mode].aliases)
    return {**lines, **{name: text for name, (text, _, _) in PROCESSES.items()}}


def setting_names() -> list[str]:
    from validation.config import Settings

    return list(Settings.model_fields)


def _plugin_yml(plugin_dir: Path) -> str:
    """Stash2Plex.yml's text ("" when it cannot be read), read without a YAML parser."""
    try:
        return (plugin_dir / "Stash2Plex.yml").read_text(encoding="utf-8")
    except OSError:
        return ""


def version(plugin_dir: Path) -> str:
    """The version Stash2Plex.yml declares (the one Stash shows)."""
    match = re.search(r"^version:\s*['\"]?([^'\"\s]+)", _plugin_yml(plugin_dir), re.M)
    return match.group(1) if match else "unknown"


def setting_help(plugin_dir: Path) -> dict[str, str]:
    """Each setting's name and description as Stash's settings page shows them (the one
    table: Stash2Plex.yml's ``settings``); every description there is one double-quoted line."""
    block = _plugin_yml(plugin_dir).split("\nsettings:\n", 1)[-1]
    found = re.findall(r"^  (\w+):\n    displayName: (.+)\n    description: (\".*\")$", block, re.M)
    return {name: f"{shown.strip()}: {json.loads(said)}" for name, shown, said in found}


def _add_options(parser: argparse.ArgumentParser, nested: bool, described: dict[str, str]) -> None:
    """The options every command takes, accepted before or after the command's name.

    In a command's own parser (``nested``) they default to SUPPRESS, so a value given
    before the command name is not overwritten by the sub-parser's default.
    """
    from validation.legacy import RENAMED_INVERTED

    extra: dict[str, Any] = {"default": argparse.SUPPRESS} if nested else {}
    switch: dict[str, Any] = {"action": "store_true", **extra}
    for name, text, default in (
        ("stash_url", "Stash's address", f"; default {DEFAULT_STASH_URL}"),
        ("stash_api_key", "Stash's API key, Settings → Security", ""),
        ("data_dir", "queue and ledger folder", "; default <plugin>/data"),
    ):
        parser.add_argument(flag(name), help=f"{text} [{env_name(name)}{default}]", **extra)
    parser.add_argument("--json", help="print the result as JSON (for scripts)", **switch)
    parser.add_argument("--no-progress", help="no progress bar", **switch)
    parser.add_argument("-v", "--verbose", help="also print debug lines", **switch)
    group = parser.add_argument_group("plugin settings, as Stash's settings page names them (docs/configuration.md)")
    for name in setting_names():
        text = described.get(name, "").replace("%", "%%")  # argparse formats help with %
        group.add_argument(flag(name), dest=name, metavar="VALUE", help=f"{text} [{env_name(name)}]", **extra)
    for name in RENAMED_INVERTED:  # renamed settings, still read (with a warning naming the new one)
        group.add_argument(flag(name), dest=name, help=argparse.SUPPRESS, **extra)


def build_parser(plugin_dir: Path | None = None) -> argparse.ArgumentParser:
    commands_help = command_help()
    parser = argparse.ArgumentParser(
        prog="Stash2Plex.py",
        usage="Stash2Plex.py [--version] [options] command [options]",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description="Keep Plex metadata in step with Stash, from a shell. Commands "
        "(dashes or underscores: process-queue = process_queue):\n"
        + "\n".join(f"  {name:14} {text}" for name, text in commands_help.items()),
        epilog="'Stash2Plex.py <command> --help' shows one command. Every option can also be set as the "
        "environment variable named beside it (prefer that for secrets: flags show in 'ps'). Order: flag, "
        "variable, the setting saved in Stash, the default.",
    )
    parser.add_argument("--version", action="version", version=f"Stash2Plex {version(plugin_dir or PLUGIN_DIR)}")
    parser.add_argument("--dry-run", action="store_true", help=f"{', '.join(DRY_RUN_COMMANDS)}: {DRY_RUN_TEXT}")
    parser.set_defaults(scene_id=None, rating_key=None, once=False, serve=False)
    described = setting_help(plugin_dir or PLUGIN_DIR)
    _add_options(parser, nested=False, described=described)
    # No help= per command: the description above lists them, once.
    commands = parser.add_subparsers(dest="command", metavar="command", required=True, help="see the list above")
    for name, text in commands_help.items():
        dashed, row = name.replace("_", "-"), MODES.get(name)
        operands = row.operands if row else ""
        sub = commands.add_parser(
            name,
            aliases=[dashed] if dashed != name else [],
            usage=f"Stash2Plex.py {dashed}{operands} [options]",
            description=f"{text}.",
            epilog="Every option can also be set as the environment variable named beside it.",
        )
        sub.set_defaults(command=name)
        if name in DRY_RUN_COMMANDS:
            sub.add_argument("--dry-run", action="store_true", default=argparse.SUPPRESS, help=DRY_RUN_TEXT)
        if name in PROCESSES:
            _, switch, said = PROCESSES[name]
            sub.add_argument(switch, action="store_true", default=False, help=said)
        if operands:
            sub.add_argument("scene_id", nargs="?", help="the id of a Stash scene")
        if name == "pin":
            sub.add_argument("rating_key", nargs="?", help="the ratingKey of the Plex item")
        _add_options(sub, nested=True, described=described)
    return parser


def _value(args: argparse.Namespace, env: dict[str, str], name: str) -> str | None:
    flag = getattr(args, name, None)
    return flag if flag is not None else (env.get(env_name(name)) or None)


def connection_for(url: str, api_key: str | None, plugin_dir: Path) -> ServerConnection:
    """A Stash connection from ``http(s)://host[:port]``, authenticated by the API key."""
    parts = urlsplit(url.strip())
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise UsageError(f"--stash-url must look like http://localhost:9999, got {url!r}")
    if parts.path not in ("", "/") or parts.query:
        raise UsageError(f"--stash-url must be Stash's address without a path, got {url!r}")
    try:
        port = parts.port or (443 if parts.scheme == "https" else 80)
    except ValueError:
        raise UsageError(f"--stash-url has an invalid port: {url!r}") from None
    return ServerConnection(
        Host=parts.hostname, Port=port, PluginDir=str(plugin_dir), Scheme=parts.scheme, ApiKey=api_key or None
    )


def _app(args: argparse.Namespace, env: dict[str, str], log: TerminalLog, plugin_dir: Path) -> App:
    from validation.legacy import RENAMED_INVERTED

    connection = connection_for(
        _value(args, env, "stash_url") or DEFAULT_STASH_URL, _value(args, env, "stash_api_key"), plugin_dir
    )
    names = setting_names() + list(RENAMED_INVERTED)
    overrides = {n: v for n in names if (v := _value(args, env, n)) is not None}
    data_dir = _value(args, env, "data_dir")
    return App(
        connection,
        env,
        log,
        data_dir=Path(data_dir) if data_dir else None,
        settings_overrides=overrides,
        surface=COMMAND_LINE,
    )


def render(output: Any, mode: str) -> list[str]:
    """The task's reply as lines for a person, as its row in the registry says (``--json``
    prints it as it is, for scripts)."""
    row = MODES[mode]
    if not isinstance(output, dict):
        return [_scalar(output)]
    if output.get("dry_run") and "scenes" in output:  # a plan: all and recent (row.plan), reconcile (its own)
        from worker.preview import plan_lines

        return plan_lines(output)
    if row.lines:
        return list(function(row.lines)(output))
    if row.checks:  # the verdict first, then the rest of the reply
        problems = list(output.get("problems") or [])
        verdict = "all checks passed" if output.get("ok") else f"{len(problems)} problem(s)"
        rest = {k: v for k, v in output.items() if k not in ("ok", "problems")}
        return [f"{mode.replace('_', ' ')}: {verdict}", *(f"  - {problem}" for problem in problems), *readable(rest)]
    return readable(output)


def readable(data: dict, indent: str = "") -> list[str]:
    """Nested dicts and lists as indented ``name: value`` lines; yes/no for booleans.

    >>> readable({"ok": False, "plex": {"version": None}, "tags": ["a", "b"]})
    ['ok: no', 'plex:', '  version: none', 'tags: a, b']
    """
    lines = []
    for key, value in data.items():
        label = f"{indent}{str(key).replace('_', ' ')}"
        if isinstance(value, dict) and value:
            lines.append(f"{label}:")
            lines += readable(value, indent + "  ")
        elif isinstance(value, list) and any(isinstance(item, (dict, list)) for item in value):
            lines.append(f"{label}:")
            for item in value:
                inner = readable(item, indent + "    ") if isinstance(item, dict) else [indent + "    " + _scalar(item)]
                lines.append(f"{indent}  - {inner[0].strip()}" if inner else f"{indent}  -")
                lines += inner[1:]
        elif isinstance(value, list):
            lines.append(f"{label}: {', '.join(_scalar(item) for item in value) or 'none'}")
        else:
            lines.append(f"{label}: {_scalar(value) if value != {} else 'none'}")
    return lines


def _scalar(value: Any) -> str:
    if isinstance(value, bool):
        return "yes" if value else "no"
    if value is None:
        return "none"
    if isinstance(value, float):
        return f"{value:,.2f}".rstrip("0").rstrip(".")
    return str(value)


def _options(args: argparse.Namespace, mode: str) -> dict[str, Any]:
    """What the task is asked for beyond its name; UsageError when the combination makes no sense."""
    if args.dry_run and mode not in DRY_RUN_COMMANDS:
        raise UsageError(f"--dry-run works with {', '.join(DRY_RUN_COMMANDS)}, not {mode}")
    operands = MODES[mode].operands if mode in MODES else ""  # watch is no mode
    if operands:
        if not (args.scene_id or "").isdigit():
            raise UsageError(f"{mode} needs a scene id (a number, e.g. {mode} 42), got {args.scene_id!r}")
    elif args.scene_id is not None:
        raise UsageError(f"{mode} takes no argument, got {args.scene_id!r}")
    if mode == "pin" and not (args.rating_key or "").isdigit():
        raise UsageError(
            f"pin needs the Plex item's ratingKey after the scene id (e.g. pin 42 1234), got {args.rating_key!r}"
        )
    options: dict[str, Any] = {"dry_run": args.dry_run, "full_reply": True}
    if operands:
        options["scene_id"] = int(args.scene_id)
    if mode == "pin":
        options["rating_key"] = int(args.rating_key)
    return options


def _run(
    args: argparse.Namespace, mode: str, env: dict[str, str], stdout: TextIO, log: TerminalLog, plugin_dir: Path
) -> int:
    from tasks import run_task

    app = None
    try:
        options = _options(args, mode)
        app = _app(args, env, log, plugin_dir)
        app.options.update(options)
        capture_library_logs(log)
        if mode == "watch":
            from app.watch import run as watch

            app.take_over()  # as every task does (tasks/__init__.py run_task)
            return watch(app, once=args.once)
        output = run_task(mode, app, options)
    except UsageError as exc:
        log.error(str(exc))
        return 2
    except KeyboardInterrupt:
        log.error("interrupted; nothing is lost: queued jobs stay queued for the next run or process_queue")
        return 130
    except Exception as exc:
        error = in_words(exc)
        if error is not None:
            log.error(str(error))
        else:  # a bug: say so plainly; the traceback with --verbose
            log.error(f"unexpected {type(exc).__name__}: {exc}")
            log.debug(traceback.format_exc())
        return 1
    finally:
        if app is not None:
            app.close()
        log.finish()
    text = (
        json.dumps(output, ensure_ascii=False, indent=2, default=str) if args.json else "\n".join(render(output, mode))
    )
    stdout.write(log.redact(text) + "\n")
    stdout.flush()
    return 1 if MODES[mode].checks and not output.get("ok") else 0  # health_check found problems


def main(argv: list[str], stdout: TextIO, stderr: TextIO, env: dict[str, str], plugin_dir: Path) -> int:
    try:
        args = build_parser(plugin_dir).parse_args(argv)
    except SystemExit as exc:  # --help (0) or a bad command line (2): argparse has printed why
        return int(exc.code or 0)
    if args.command == "demo":
        from app.demo import main as demo

        return demo(stdout, stderr, env, serve=args.serve)
    mode = ALIASES.get(args.command, args.command)
    quiet = mode in MODES and MODES[mode].quiet and not args.verbose
    log = TerminalLog(stderr, Redactor(), verbose=args.verbose, bar=False if args.no_progress else None, quiet=quiet)
    return _run(args, mode, env, stdout, log, plugin_dir)
