"""The bulk-edit storm: scene hooks fired back to back, as Stash runs them, while the
drainer writes the earlier ones to a Plex that takes tens of milliseconds a write.

Stash runs post hooks inside the mutation, one plugin run after another, each waiting for
the previous (``pkg/plugin/plugins.go``: ``executePostHooks`` -> ``waitForTask``), so a bulk
edit of N scenes waits for N runs of our hook. The baseline is a trivial plugin (it reads
its stdin and writes its reply) started exactly as Stash starts ours (``Stash2Plex.yml``'s
exec: ``python -S <script>``), N times, in the same run: before and after the hook storm,
so drift of the machine's speed hits both alike.
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from tests.emulators.plex_emulator import LoadModel
from tests.runner import hook_document

TRIVIAL_PLUGIN = """import json, sys
document = json.loads(sys.stdin.read())
sys.stdout.write(json.dumps({"output": "ok", "error": None}))
"""


def installed_plugin(folder: Path, repo: Path) -> Path:
    """The plugin as Stash's plugins folder holds it once its first run installed its
    packages into ``deps/`` (app/bootstrap.py): the hook's package linked in from here."""
    spec = importlib.util.spec_from_file_location("build_plugin_source", repo / "tools" / "build_plugin_source.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    target = folder / "Stash2Plex"
    for name in module.runtime_files(repo):
        (target / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(repo / name, target / name)
    deps = target / "deps" / f"py{sys.version_info.major}{sys.version_info.minor}"
    deps.mkdir(parents=True)
    import persistqueue

    os.symlink(Path(persistqueue.__file__).parent, deps / "persistqueue", target_is_directory=True)
    return target


def _proc_cpu_s(pid: int) -> float | None:
    """User + system CPU seconds of a live process (and its reaped children), or None."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii") as stat:
            fields = stat.read().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None
    ticks = sum(int(f) for f in fields[11:15])  # utime stime cutime cstime
    return ticks / os.sysconf("SC_CLK_TCK")


def _drainer_pid(data_dir: str) -> int | None:
    try:
        text = (Path(data_dir) / "drainer.lock").read_text().strip()
    except OSError:
        return None
    return int(text) if text.isdigit() else None


class DrainerWatch:
    """The detached drainer's CPU seconds, read until it exits (it is not our child)."""

    def __init__(self) -> None:
        self.cpu: dict[int, float] = {}

    def sample(self, data_dir: str) -> None:
        pid = _drainer_pid(data_dir)
        if pid:
            cpu = _proc_cpu_s(pid)
            if cpu is not None:
                self.cpu[pid] = cpu

    @property
    def total(self) -> float:
        return sum(self.cpu.values())


def _storm(launch, argv: list[str], documents: list[bytes], env: dict, watch=None) -> list:
    runs = []
    for document in documents:
        runs.append(launch(argv, document, env))
        if watch is not None:
            watch()
    return runs


def _wait_written(lab, saves: int, watch: DrainerWatch, timeout: float = 600.0) -> float:
    """Sample the drainer until every save is in Plex; when that happened."""
    deadline = time.monotonic() + timeout
    pending = {rk: f"bulk edit {sid}" for sid, rk in zip(lab.scene_ids[:saves], lab.rating_keys[:saves])}
    while pending and time.monotonic() < deadline:
        watch.sample(lab.data_dir)
        pending = {rk: t for rk, t in pending.items() if lab.plex.item(rk)["fields"]["title"] != t}
        time.sleep(0.05)
    if pending:
        raise TimeoutError(f"{len(pending)} saves never reached Plex")
    return time.monotonic()


def _wait_exited(lab, watch: DrainerWatch, timeout: float = 120.0) -> None:
    """Sample the drainer until it exits (after its linger)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        watch.sample(lab.data_dir)
        pid = _drainer_pid(lab.data_dir)
        if pid is None or _proc_cpu_s(pid) is None:
            return
        time.sleep(0.1)


def bench_storm(launch, build_argv, lab_factory, line, ratio, repo: Path, saves: int = 200) -> None:
    """``saves`` scene saves of a bulk edit, each waiting for our hook, the drainer
    writing beside them to a Plex of 4 workers at 40 ms a write, 10 ms a read."""
    print(f"\nBulk-edit storm: {saves} scene hooks back to back with the drainer writing beside them")
    lab = lab_factory(saves + 1)
    lab.plex.latency = 0.0
    lab.plex.load = LoadModel(workers=4, write_s=0.040, read_s=0.010)
    tmp = tempfile.TemporaryDirectory()
    try:
        trivial = Path(tmp.name) / "trivial.py"
        trivial.write_text(TRIVIAL_PLUGIN)
        plugin_dir = installed_plugin(Path(tmp.name), repo)
        argv = build_argv(plugin_dir)
        subprocess.run([argv[0], "-m", "compileall", "-q", str(plugin_dir)], check=True)  # as after a first run
        trivial_argv = [*argv[:-1], str(trivial)]  # started exactly as ours: the same interpreter and flags
        contexts = [lab.stash.update_scene(sid, title=f"bulk edit {sid}") for sid in lab.scene_ids[:saves]]
        documents = [json.dumps(hook_document(lab.connection, c)).encode() for c in contexts]
        _storm(launch, trivial_argv, documents[:5], lab.env)  # warm the page cache
        before = _storm(launch, trivial_argv, documents, lab.env)
        with_site = _storm(launch, [argv[0], str(trivial)], documents, lab.env)
        watch = DrainerWatch()
        started = time.monotonic()
        hooks = _storm(launch, argv, documents, lab.env, lambda: watch.sample(lab.data_dir))
        storm_s = time.monotonic() - started
        after = _storm(launch, trivial_argv, documents, lab.env)
        written_at = _wait_written(lab, saves, watch)
        _wait_exited(lab, watch)
        _report(line, ratio, saves, before + after, hooks, storm_s, written_at - started, watch, lab)
        site_med = statistics.median(r.wall for r in with_site)
        hook_med = statistics.median(r.wall for r in hooks)
        line(
            "  the trivial plugin started with site",
            f"{site_med * 1000:.0f} ms",
            "(python trivial.py)",
            ratio(hook_med, site_med),
        )
    finally:
        tmp.cleanup()
        lab.close()


def _report(line, ratio, saves, trivial, hooks, storm_s, drained_s, watch, lab) -> None:
    bad = [r.reply for r in hooks if not (r.output and "queued" in r.output)]
    if bad:
        print(f"  {len(bad)} hooks did not queue, e.g. {bad[0]}", file=sys.stderr)
    hook_med = statistics.median(r.wall for r in hooks)
    base_med = statistics.median(r.wall for r in trivial)
    line("hook per save (median)", f"{hook_med * 1000:.0f} ms", f"{base_med * 1000:.0f} ms trivial plugin")
    line("  ratio to the trivial plugin", ratio(hook_med, base_med), "", "", "<= 2.0x")
    line("  added per save over the trivial plugin", f"{(hook_med - base_med) * 1000:.0f} ms")
    hook_p95 = sorted(r.wall for r in hooks)[int(0.95 * (len(hooks) - 1))]
    base_p95 = sorted(r.wall for r in trivial)[int(0.95 * (len(trivial) - 1))]
    line(
        "hook per save (p95)",
        f"{hook_p95 * 1000:.0f} ms",
        f"{base_p95 * 1000:.0f} ms trivial",
        ratio(hook_p95, base_p95),
    )
    line(f"the storm of {saves} saves", f"{storm_s:.1f} s", f"{sum(r.wall for r in trivial) / 2:.1f} s trivial")
    hooks_cpu = sum(r.cpu for r in hooks)
    line("CPU: the hooks", f"{hooks_cpu:.1f} s", f"{sum(r.cpu for r in trivial) / 2:.1f} s trivial")
    line("CPU: the drainer (till it exited)", f"{watch.total:.1f} s", f"{len(watch.cpu)} drainer process(es)")
    line(
        "every save in Plex after the storm began", f"{drained_s:.1f} s", f"peak Plex workers {lab.plex.load.peak_busy}"
    )
