"""The hook path never imports an HTTP client, plexapi or stashapi (nor pydantic), nor
what only costs it time: persist-queue's asyncio/ssl, tenacity, the dependency check."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from sync_queue import spool
from tests.runner import REPO, drainer_lock_held

PROBE = r"""
import io, json, os, sys
sys.path.insert(0, sys.argv[1])
import Stash2Plex
import app.bootstrap
checks = []
real = app.bootstrap.ensure_dependencies
app.bootstrap.ensure_dependencies = lambda *a: checks.append(a) or real(*a)
doc = sys.stdin.read()
out = io.StringIO()
code = Stash2Plex.main(io.StringIO(doc), out, io.StringIO(), dict(os.environ))
top = {m.split(".")[0] for m in sys.modules}
heavy = sorted(top & {"requests", "urllib3", "plexapi", "stashapi", "pydantic", "http"})
costly = sorted(top & {"asyncio", "ssl", "tenacity", "uuid", "subprocess"} | ({"importlib.metadata"} & set(sys.modules)))
print(json.dumps({"code": code, "reply": json.loads(out.getvalue()), "heavy": heavy, "costly": costly,
                  "checks": len(checks)}))
"""


def test_hook_path_imports_no_network_client(tmp_path):
    with drainer_lock_held(tmp_path / "data"):  # a drainer "is running": no spawn
        document = {
            "server_connection": {
                "Scheme": "http",
                "Host": "0.0.0.0",
                "Port": 9,
                "PluginDir": str(REPO),
                "SessionCookie": {"Name": "session", "Value": "cookie-value"},
            },
            "args": {
                "hookContext": {
                    "id": 7,
                    "type": "Scene.Update.Post",
                    "input": {"id": "7", "title": "x"},
                    "inputFields": ["id", "title"],
                }
            },
        }
        env = {"STASH2PLEX_DATA_DIR": str(tmp_path / "data"), "PATH": "/usr/bin:/bin"}
        done = subprocess.run(
            [sys.executable, "-c", PROBE, str(REPO)],
            input=json.dumps(document),
            text=True,
            capture_output=True,
            env=env,
            timeout=60,
        )
        result = json.loads(done.stdout)
    assert result["code"] == 0 and result["reply"] == {"output": "scene 7 queued", "error": None}
    assert result["heavy"] == []
    assert result["costly"] == []
    assert result["checks"] == 0  # the dependency check runs only when an import fails (tests/test_bootstrap.py)


FAST_PROBE = r"""
import io, json, os, sys
sys.path.insert(0, sys.argv[1])
before = set(sys.modules)
import Stash2Plex
out, err = io.StringIO(), io.StringIO()
err.isatty = lambda: False
code = Stash2Plex.main(io.StringIO(sys.stdin.read()), out, err, dict(os.environ))
print(json.dumps({"code": code, "reply": json.loads(out.getvalue()), "log": err.getvalue(),
                  "imported": sorted(set(sys.modules) - before)}))
"""
# What a hook may import when a drainer runs and the data folder is made: the standard
# library's json and our lean modules (core/log.py's StashLog, with ``_thread``'s lock).
# Not sqlite3, dataclasses, typing, logging,
# pathlib, subprocess, persist-queue, the job model or the models of stdin.
FAST_LANE_FORBIDDEN = {
    "sqlite3",
    "dataclasses",
    "typing",
    "logging",
    "pathlib",
    "subprocess",
    "threading",
    "persistqueue",
    "sync_queue.queue",
    "sync_queue.job",
    "validation.plugin_input",
    "app.root",
}


def _hook_document(scene_id: int, fields: list[str]) -> dict:
    return {
        "server_connection": {
            "Scheme": "http",
            "Host": "0.0.0.0",
            "Port": 9,
            "PluginDir": str(REPO),
            "Dir": "/stash/config",
            "SessionCookie": {"Name": "session", "Value": "cookie-value"},
        },
        "args": {
            "hookContext": {
                "id": scene_id,
                "type": "Scene.Update.Post",
                "input": {"id": str(scene_id), **dict.fromkeys(fields, "x")},
                "inputFields": ["id", *fields],
            }
        },
    }


def _run_hook(document: dict, data: Path) -> dict:
    done = subprocess.run(
        [sys.executable, "-S", "-c", FAST_PROBE, str(REPO)],
        input=json.dumps(document),
        text=True,
        capture_output=True,
        env={"STASH2PLEX_DATA_DIR": str(data), "PATH": "/usr/bin:/bin"},
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_a_hook_while_the_drainer_runs_imports_json_and_lean_modules_only(tmp_path):
    """The run Stash waits for in every save of a bulk edit: a scene hook while a drainer
    runs imports the standard library's json and our lean modules only (no SQLite: a busy
    queue file never holds it up), and answers as the first run did (which claimed the
    data folder)."""
    data = tmp_path / "data"
    documents = [_hook_document(7, ["title"]), _hook_document(8, ["title"]), _hook_document(8, ["details"])]
    documents.append(_hook_document(9, ["organized"]))
    documents.append(_hook_document(10, ["play_count"]))
    with drainer_lock_held(data):
        runs = [_run_hook(document, data) for document in documents]
    assert [(r["code"], r["reply"]["output"], r["reply"]["error"], r["log"]) for r in runs] == [
        (0, "scene 7 queued", None, "\x01d\x02scene 7 queued (interactive)\n"),
        (0, "scene 8 queued", None, "\x01d\x02scene 8 queued (interactive)\n"),
        (0, "scene 8 queued", None, "\x01d\x02scene 8 queued (interactive)\n"),
        (0, "scene 9 queued", None, "\x01d\x02scene 9 queued (interactive)\n"),
        (
            0,
            "scene 10: nothing to sync",
            None,
            "\x01d\x02scene 10: only id, play_count changed, which Plex does not show; nothing queued\n",
        ),
    ]
    assert "persistqueue" not in runs[0]["imported"]  # no hook imports it
    for run in runs[1:]:
        assert sorted(FAST_LANE_FORBIDDEN.intersection(run["imported"])) == [], run["imported"]
    records, bad = spool.read(str(data / "queue" / spool.SPOOL_FILE))
    assert bad == [] and [(r["scene"], r["priority"], r["fields"]) for r in records] == [
        (7, "interactive", ["title"]),
        (8, "interactive", ["title"]),
        (8, "interactive", ["details"]),
        (9, "interactive", ["organized"]),
    ]
