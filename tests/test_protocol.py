"""The stdin/stdout/stderr protocol, through a real subprocess run as Stash runs it.

Whatever Stash (or a user) puts on stdin, the plugin answers with exactly one JSON
object ``{"output", "error"}`` on stdout, exits non-zero on an error, writes only
``\\x01<level>\\x02`` lines on stderr, never shows a traceback, and never echoes the
session cookie. (Stash writes stdin and reads stdout in pkg/plugin/raw.go ``Start``;
it reads stderr lines in pkg/plugin/common/log/log.go and pkg/logger/plugin.go.)
"""

from __future__ import annotations

import json
import re
import socket
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from tests.conftest import STASH_COOKIE
from tests.emulators.stash_emulator import session_cookie_json
from tests.runner import PluginRun, drainer_lock_held, run_plugin, task_document

PROTOCOL_LINE = re.compile(r"\x01[tdiwep]\x02\S")
STASH_LINE_LIMIT = 64 * 1024


def assert_protocol(run: PluginRun) -> dict:
    """stdout is one JSON object with exactly output and error; stderr is all protocol lines."""
    reply = json.loads(run.stdout)  # raises on a second document or any stray print
    assert isinstance(reply, dict) and set(reply) == {"output", "error"}, run.stdout
    for line in run.stderr.split("\n"):
        if line.strip():
            assert PROTOCOL_LINE.match(line), f"stderr line outside the protocol: {line[:200]!r}"
            assert len(line.encode()) + 1 < STASH_LINE_LIMIT
    for stream in (run.stdout, run.stderr):
        assert "Traceback" not in stream
        assert STASH_COOKIE not in stream
    return reply


@pytest.fixture(scope="module")
def dirs(tmp_path_factory) -> tuple[Path, Path]:
    return tmp_path_factory.mktemp("plugin"), tmp_path_factory.mktemp("data")


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _connection(plugin_dir: Path, **changes) -> dict:
    connection = {
        "Scheme": "http",
        "Host": "0.0.0.0",
        "Port": 9999,
        "SessionCookie": session_cookie_json(STASH_COOKIE),
        "Dir": str(plugin_dir.parent),
        "PluginDir": str(plugin_dir),
    }
    for key, value in changes.items():
        if value is KeyError:
            del connection[key]
        else:
            connection[key] = value
    return connection


def _hook(plugin_dir: Path, **context) -> dict:
    hook_context = {"id": 7, "type": "Scene.Update.Post", "input": None}
    hook_context.update(context)
    return {"server_connection": _connection(plugin_dir), "args": {"hookContext": hook_context}}


def _task(plugin_dir: Path, args, **changes) -> dict:
    return {"server_connection": _connection(plugin_dir, **changes), "args": args}


QS = {"mode": "queue_status"}

# id → (document built from the plugin dir, substrings the error must contain)
BAD_INPUT = {
    "empty stdin": (lambda d: "", ["stdin is empty"]),
    "whitespace only": (lambda d: " \n\t  \n", ["stdin is empty"]),
    "not JSON": (lambda d: "{server_connection: nope", ["not JSON", "line 1 column 2"]),
    "truncated JSON": (lambda d: json.dumps(_task(d, QS))[:-7], ["not JSON"]),
    "JSON nested too deeply": (lambda d: "[" * 100_000 + "]" * 100_000, ["nested too deeply"]),
    "JSON array": (lambda d: "[1, 2]", ["JSON object", "list"]),
    "JSON string": (lambda d: '"queue_status"', ["JSON object", "str"]),
    "JSON null": (lambda d: "null", ["JSON object", "NoneType"]),
    "server_connection missing": (lambda d: {"args": QS}, ["server_connection", "missing"]),
    "server_connection null": (lambda d: {"server_connection": None, "args": QS}, ["server_connection", "missing"]),
    "server_connection a list": (lambda d: {"server_connection": [1], "args": QS}, ["server_connection", "list"]),
    "Port a string": (lambda d: _task(d, QS, Port="abc"), ["server_connection.Port", "'abc'"]),
    "Port a numeric string": (lambda d: _task(d, QS, Port="9999"), ["server_connection.Port", "'9999'"]),
    "Port out of range": (lambda d: _task(d, QS, Port=70000), ["server_connection.Port", "70000"]),
    "Port zero": (lambda d: _task(d, QS, Port=0), ["server_connection.Port", "'0'"]),
    "Port a boolean": (lambda d: _task(d, QS, Port=True), ["server_connection.Port", "True"]),
    "Port missing": (lambda d: _task(d, QS, Port=KeyError), ["server_connection.Port", "missing"]),
    "Host missing": (lambda d: _task(d, QS, Host=KeyError), ["server_connection.Host", "missing"]),
    "Scheme ftp": (lambda d: _task(d, QS, Scheme="ftp"), ["server_connection.Scheme", "'ftp'"]),
    "PluginDir missing": (lambda d: _task(d, QS, PluginDir=KeyError), ["server_connection.PluginDir", "missing"]),
    "PluginDir a number": (lambda d: _task(d, QS, PluginDir=5), ["server_connection.PluginDir", "'5'"]),
    "unknown mode": (
        lambda d: _task(d, {"mode": "sync_everything"}),
        ["args.mode", "'sync_everything'", "queue_status"],
    ),
    "mode a number": (lambda d: _task(d, {"mode": 3}), ["args.mode", "'3'"]),
    "mode missing and no hookContext": (lambda d: _task(d, {"other": "x"}), ["args.mode", "missing"]),
    "args missing": (lambda d: {"server_connection": _connection(d)}, ["args.mode", "missing"]),
    "args a list": (lambda d: _task(d, ["mode", "all"]), ["args", "list"]),
    "args a string": (lambda d: _task(d, "queue_status"), ["args", "str"]),
    "hookContext id 0": (lambda d: _hook(d, id=0), ["args.hookContext.id", "'0'"]),
    "hookContext id negative": (lambda d: _hook(d, id=-4), ["args.hookContext.id", "'-4'"]),
    "hookContext id a string": (lambda d: _hook(d, id="abc"), ["args.hookContext.id", "'abc'"]),
    "hookContext id a numeric string": (lambda d: _hook(d, id="12"), ["args.hookContext.id", "'12'"]),
    "hookContext id a float": (lambda d: _hook(d, id=1.5), ["args.hookContext.id", "'1.5'"]),
    "hookContext id missing": (
        lambda d: {
            "server_connection": _connection(d),
            "args": {"hookContext": {"type": "Scene.Create.Post", "input": None}},
        },
        ["args.hookContext.id", "missing"],
    ),
    "hookContext Image.Update.Post": (
        lambda d: _hook(d, type="Image.Update.Post"),
        ["args.hookContext.type", "'Image.Update.Post'"],
    ),
    "hookContext Gallery.Destroy.Post": (
        lambda d: _hook(d, type="Gallery.Destroy.Post"),
        ["args.hookContext.type", "'Gallery.Destroy.Post'"],
    ),
    "hookContext type missing": (lambda d: _hook(d, type=None), ["args.hookContext.type", "missing"]),
    "hookContext a list": (lambda d: _task(d, {"hookContext": [7]}), ["args.hookContext", "list"]),
    "inputFields a string": (
        lambda d: _hook(d, input={"id": "7"}, inputFields="title"),
        ["args.hookContext.inputFields", "'title'"],
    ),
    "inputFields with a number": (
        lambda d: _hook(d, input={"id": "7"}, inputFields=["id", 5]),
        ["args.hookContext.inputFields"],
    ),
    "SessionCookie Value empty": (
        lambda d: _task(d, QS, SessionCookie={"Name": "session", "Value": ""}),
        ["server_connection.SessionCookie.Value"],
    ),
    "SessionCookie Value missing": (
        lambda d: _task(d, QS, SessionCookie={"Name": "session"}),
        ["server_connection.SessionCookie.Value"],
    ),
    "SessionCookie a string": (
        lambda d: _task(d, QS, SessionCookie="session=abc"),
        ["server_connection.SessionCookie", "JSON object"],
    ),
}


@pytest.fixture(scope="module")
def bad_runs(dirs) -> dict[str, PluginRun]:
    """Every BAD_INPUT case, run at once (each is its own plugin process)."""
    plugin_dir, data_dir = dirs
    env = {"STASH2PLEX_DATA_DIR": str(data_dir)}
    with ThreadPoolExecutor(max_workers=8) as pool:
        futures = {
            case: pool.submit(run_plugin, build(plugin_dir), env=env, timeout=30)
            for case, (build, _) in BAD_INPUT.items()
        }
        return {case: future.result() for case, future in futures.items()}


@pytest.mark.parametrize("case", list(BAD_INPUT))
def test_bad_stdin_gives_one_error_reply_naming_the_problem(case, bad_runs, dirs):
    _, data_dir = dirs
    expected = BAD_INPUT[case][1]
    run = bad_runs[case]
    reply = assert_protocol(run)
    assert reply["output"] is None
    assert isinstance(reply["error"], str)
    for part in expected:
        assert part in reply["error"], f"{part!r} not in {reply['error']!r}"
    assert run.returncode != 0
    assert reply["error"] in run.messages("error")  # the Stash log says it too
    assert not any(data_dir.iterdir()), "a bad input must not touch the data folder"


MALFORMED_COOKIES = {
    "bare string": STASH_COOKIE,
    "list": [STASH_COOKIE],
    "Name a number": {"Name": 5, "Value": STASH_COOKIE},
    "Value a list": {"Name": "session", "Value": [STASH_COOKIE]},
    "Value an object": {"Name": "session", "Value": {"v": STASH_COOKIE}},
}


@pytest.mark.parametrize("case", list(MALFORMED_COOKIES))
def test_a_malformed_session_cookie_is_never_echoed(case, dirs):
    plugin_dir, data_dir = dirs
    document = _task(plugin_dir, QS, SessionCookie=MALFORMED_COOKIES[case])
    run = run_plugin(document, env={"STASH2PLEX_DATA_DIR": str(data_dir)}, timeout=30)
    reply = assert_protocol(run)  # checks the cookie value is in neither stream
    assert reply["output"] is None and "SessionCookie" in reply["error"]
    assert run.returncode != 0


def test_the_cookie_is_redacted_when_stash_is_unreachable(dirs, tmp_path):
    plugin_dir, _ = dirs
    document = task_document(_connection(plugin_dir, Host="127.0.0.1", Port=_closed_port()), "all")
    run = run_plugin(document, env={"STASH2PLEX_DATA_DIR": str(tmp_path)}, timeout=60)
    reply = assert_protocol(run)
    assert reply["output"] is None and reply["error"]
    assert run.returncode != 0


@pytest.mark.parametrize("encoding", ["ascii", "cp1252"])
def test_stdio_is_utf8_whatever_the_locale(encoding, tmp_path):
    """Stash writes UTF-8; the Windows ANSI code page or an ASCII locale must not garble it."""
    plugin_dir = tmp_path / "plugins-é-日本"
    plugin_dir.mkdir()
    env = {"PYTHONIOENCODING": encoding, "PYTHONUTF8": "0", "STASH2PLEX_DATA_DIR": ""}
    run = run_plugin(task_document(_connection(plugin_dir), "queue_status"), env=env, timeout=30)
    reply = assert_protocol(run)
    assert reply["error"] is None and reply["output"]["pending"] == 0
    assert (plugin_dir / "data").is_dir()  # PluginDir was read as written
    bad = run_plugin(task_document(_connection(plugin_dir), "sync-é-日本"), env=env, timeout=30)
    assert "'sync-é-日本'" in assert_protocol(bad)["error"]


# -- well-formed calls, against the emulators --------------------------------------------------


def _status(plugin) -> dict:
    run = plugin.task("queue_status")
    reply = assert_protocol(run)
    assert reply["error"] is None and run.returncode == 0
    return reply["output"]


def test_a_hook_is_answered_per_protocol(plugin):
    sid, _ = plugin.add_scene(1)
    run = plugin.hook(plugin.stash.update_scene(sid, title="x"))
    assert assert_protocol(run) == {"output": f"scene {sid} queued", "error": None}
    assert run.returncode == 0
    assert run.stdout == json.dumps({"output": f"scene {sid} queued", "error": None})


def test_a_hook_with_only_unsynced_fields_queues_nothing(plugin):
    sid, _ = plugin.add_scene(2)
    context = {
        "id": sid,
        "type": "Scene.Update.Post",
        "input": {"id": str(sid), "play_count": 3, "rating100": None},
        "inputFields": ["id", "play_count"],
    }
    with drainer_lock_held(plugin.data_dir):
        run = plugin.hook(context)
        reply = assert_protocol(run)
        assert reply["error"] is None and run.returncode == 0
        assert "nothing to sync" in reply["output"]
        assert str(sid) in reply["output"]
        assert _status(plugin)["pending"] == 0


def test_a_scan_style_hook_is_queued_as_bulk_work(plugin):
    sid, _ = plugin.add_scene(3)
    context = plugin.stash.update_scene(
        sid, files=[{"path": "/stash/media/scene-00003.mp4", "size": 1003, "duration": 61.0}]
    )
    assert context["input"] is None and "inputFields" not in context
    with drainer_lock_held(plugin.data_dir):
        run = plugin.hook(context)
        assert assert_protocol(run) == {"output": f"scene {sid} queued", "error": None}
        status = _status(plugin)
        assert status["pending"] == 1 and status["bulk"] == 1 and status["interactive"] == 0


def test_a_task_is_answered_with_a_status_object(plugin):
    run = plugin.task("queue_status")
    reply = assert_protocol(run)
    assert reply["error"] is None and run.returncode == 0
    status = reply["output"]
    assert isinstance(status, dict)
    assert status["pending"] == 0 and status["dlq"] == 0
    assert any("pending" in message for message in run.messages("info"))
