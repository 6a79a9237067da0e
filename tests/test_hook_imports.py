"""The hook path never imports an HTTP client, plexapi or stashapi (nor pydantic)."""

from __future__ import annotations

import json
import subprocess
import sys

from tests.runner import REPO, drainer_lock_held

PROBE = r"""
import io, json, os, sys
sys.path.insert(0, sys.argv[1])
import Stash2Plex
doc = sys.stdin.read()
out = io.StringIO()
code = Stash2Plex.main(io.StringIO(doc), out, io.StringIO(), dict(os.environ))
heavy = sorted({m.split(".")[0] for m in sys.modules} & {"requests", "urllib3", "plexapi", "stashapi", "pydantic", "http"})
print(json.dumps({"code": code, "reply": json.loads(out.getvalue()), "heavy": heavy}))
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
