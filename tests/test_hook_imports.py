"""The hook path never imports an HTTP client, plexapi or stashapi (nor pydantic), nor
what only costs it time: persist-queue's asyncio/ssl, tenacity, the dependency check."""

from __future__ import annotations

import json
import subprocess
import sys

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
