"""``python Stash2Plex.py demo``: the whole story in readable lines, and ``--serve`` keeps it up."""

from __future__ import annotations

import os
import re
import shlex
import signal
import subprocess
import sys
import time

import requests

from tests.runner import REPO, start_command

STORY = (
    "1. You edit three scenes in Stash",
    "title: 'scene-001' → \"Harbor at Dawn (Director's Cut)\"",
    "2. The task 'Sync all scenes'",
    "3. The dead-letter queue",
    "ambiguous: scene 11 'Two copies in Plex'",
    "unmatched: scene 12 'Renamed in Plex'",
    "'This one' for scene 11: Plex item 112",
    "title: 'Clip (final)' → 'Renamed in Plex'",
    "the inbox: 0 scenes; dead letters: 0",
    "plays 1, rating none → 80 (of 100)",
    "0 edit requests, 0 uploads",
    "0 pending (0 waiting for a retry), 0 in the dead-letter queue",
)


def test_the_demo_tells_the_whole_story_then_serve_keeps_it_up_for_the_command_line(tmp_path):
    out_path = tmp_path / "demo.out"
    run = start_command(["demo", "--serve"], {}, tmp_path / "demo.err", out_path)
    try:
        deadline = time.monotonic() + 120
        while "(any command:" not in out_path.read_text() and time.monotonic() < deadline:
            assert run.poll() is None, (tmp_path / "demo.err").read_text()[-3000:]
            time.sleep(0.1)
        text = out_path.read_text()
        assert not re.search(r"\{'|': \{|\[\]", text), text  # lines for a person, not Python's dicts
        for said in STORY:
            assert said in text, (said, text)
        plex = re.search(r"Plex: (http://127\.0\.0\.1:\d+)", text)
        assert plex is not None, text
        assert requests.get(f"{plex.group(1)}/identity", timeout=5).status_code < 500  # Plex answers
        stash = re.search(r"(http://127\.0\.0\.1:\d+)/(?:stash2plex|graphql)", text)
        assert stash is not None, text
        assert requests.post(f"{stash.group(1)}/graphql", json={"query": "{ version { version } }"}, timeout=5).ok
        tried = next(line.strip() for line in text.splitlines() if line.strip().endswith("Stash2Plex.py status"))
        *assignments, _python, script, command = shlex.split(tried)
        env = {**os.environ, **dict(a.split("=", 1) for a in assignments)}
        done = subprocess.run(
            [sys.executable, str(REPO / script), command], env=env, capture_output=True, text=True, timeout=60
        )
        assert done.stdout.startswith("0 pending"), done.stderr
        run.send_signal(signal.SIGTERM)
        assert run.wait(timeout=20) == 0
        assert out_path.read_text().rstrip().endswith("stopped")
    finally:
        if run.poll() is None:
            run.kill()
            run.wait()
