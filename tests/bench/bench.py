"""Stash2Plex benchmarks: the real plugin, run as Stash runs it, against the emulators.

    python tests/bench/bench.py --help
    python tests/bench/bench.py                    # hook queue bulk scale pacing (about 10 minutes)
    python tests/bench/bench.py hook bulk          # chosen sections
    python tests/bench/bench.py scale --huge       # and the 100,000-scene run (about 15 minutes more)

Every figure is printed beside a baseline measured in the same run and the ratio
between them, because these machines are shared and noisy: read the ratios. The Plex
emulator runs in this process and the Stash emulator in a process of its own (as the
two servers are two programs: one's replies never wait for the other's interpreter
lock); the plugin, and every baseline, runs as a process of its own, started and timed
the same way. Peak memory is each plugin process's own
high-water mark (``VmHWM`` in ``/proc/<pid>/status``, sampled while it runs), not
``wait4``'s ``ru_maxrss``, which also counts this process's memory as seen by the
forked child before it executes Python. See docs/performance.md.
"""

from __future__ import annotations

import argparse
import itertools
import json
import multiprocessing
import multiprocessing.managers
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
if str(REPO) not in sys.path:  # run as a script: ``python tests/bench/bench.py``
    sys.path.insert(0, str(REPO))

from tests.emulators.plex_emulator import PlexEmulator  # noqa: E402
from tests.emulators.stash_emulator import StashEmulator  # noqa: E402
from tests.runner import (  # noqa: E402
    _communicate,
    build_argv,
    compile_plugin,
    drainer_lock_held,
    hook_document,
    parse_reply,
    task_document,
)

LATENCY_S = 0.010
CONCURRENCY = 6  # the plugin's default plex_concurrency; the floor uses the same
SECTIONS = ("hook", "queue", "bulk", "scale", "pacing")  # the default run
MORE_SECTIONS = ("storm", "realistic", "small", "entity", "reconcile", "listen", "inbox")


def line(name: str, value: str, baseline: str = "", ratio: str = "", target: str = "") -> None:
    print(f"  {name:<44} {value:>14} {baseline:>22} {ratio:>8}  {target}", flush=True)


# -- running and measuring one process ------------------------------------------------
def _vm_hwm_kb(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/status", encoding="ascii") as status:
            for row in status:
                if row.startswith("VmHWM:"):
                    return int(row.split()[1])
    except (OSError, ValueError):
        pass
    return 0


def _children(pid: int) -> list[int]:
    found = []
    try:
        for task in os.listdir(f"/proc/{pid}/task"):
            with open(f"/proc/{pid}/task/{task}/children", encoding="ascii") as kids:
                found.extend(int(k) for k in kids.read().split())
    except (OSError, ValueError):
        pass
    return found


class PeakMemory:
    """The largest ``VmHWM`` of a process and its children, sampled every ``every`` s.

    The high-water mark only grows, so sampling misses at most what the process gains
    in its last interval. Linux only (``/proc``); elsewhere it reports 0.
    """

    def __init__(self, pid: int, every: float) -> None:
        self.pid, self.every, self.kb = pid, every, 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._watch, daemon=True)
        self._thread.start()

    def _watch(self) -> None:
        while not self._stop.is_set():
            for pid in [self.pid, *_children(self.pid)]:
                self.kb = max(self.kb, _vm_hwm_kb(pid))
            self._stop.wait(self.every)

    def stop(self) -> int:
        self._stop.set()
        self._thread.join()
        return self.kb


class Run:
    def __init__(self, wall: float, stdout: str, stderr: str, returncode: int, peak_kb: int, cpu: float = 0.0) -> None:
        self.wall, self.stdout, self.stderr, self.returncode, self.peak_kb = wall, stdout, stderr, returncode, peak_kb
        self.cpu = cpu  # user + system seconds of the process (wait4; CPU time is not inflated by the fork)
        self.reply = parse_reply(stdout, returncode)

    @property
    def output(self):
        return self.reply.get("output")

    @property
    def error(self):
        return self.reply.get("error")


def launch(argv: list[str], stdin: bytes = b"", env: dict | None = None, sample_every: float | None = None) -> Run:
    """One process, timed from start to exit; peak memory sampled only when asked
    (sampling costs this process CPU, so timed runs and memory runs are separate)."""
    started = time.perf_counter()
    proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    peak = PeakMemory(proc.pid, sample_every) if sample_every else None
    out, err = _communicate(proc, stdin, 7200)
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    wall = time.perf_counter() - started
    cpu = usage.ru_utime + usage.ru_stime
    text = out.decode("utf-8", "replace"), err.decode("utf-8", "replace")
    return Run(wall, *text, proc.returncode, peak.stop() if peak else 0, cpu)


def python(code: str, stdin: bytes = b"", sample_every: float | None = None) -> Run:
    return launch([sys.executable, "-c", code], stdin, dict(os.environ), sample_every)


class BenchStash(StashEmulator):
    """The Stash emulator as the benchmark drives it from another process (through a
    ``multiprocessing`` manager, which forwards method calls only)."""

    def begin(self) -> None:
        self.start()

    def get_url(self) -> str:
        return self.url

    def set_plugin_settings(self, settings: dict) -> None:
        self.plugin_settings = settings

    def set_api_key(self, key: str) -> None:
        self.api_key = key

    def clear_request_logs(self) -> None:
        self.requests.clear()
        self.screenshot_requests.clear()
        self.screenshot_headers.clear()

    def screenshot_count(self) -> int:
        return len(self.screenshot_requests)

    def graphql_count(self, name: str) -> int:
        return len(self.graphql_requests(name))


class _Managers(multiprocessing.managers.BaseManager):
    pass


_Managers.register("BenchStash", BenchStash)


def remote_stash():
    """A started Stash emulator in a process of its own, and its manager (to shut down)."""
    manager = _Managers(ctx=multiprocessing.get_context("fork"))
    manager.start()
    stash = manager.BenchStash()  # type: ignore[attr-defined]
    stash.begin()
    return stash, manager


class Lab:
    """Both emulators with a library of n scenes whose paths differ by a prefix."""

    def __init__(self, scenes: int, latency: float | None = None, common_tag: str | None = None) -> None:
        self.scenes = scenes
        self.stash, self._stash_process = remote_stash()
        self.plex = PlexEmulator().start()
        self.plex.add_section("Stash", ["/plex/media"], key=1)
        self.rating_keys = []
        self.scene_ids: list[int] = []
        for n in range(scenes):
            name = f"studio-{n % 20}/scene-{n:06d}.mp4"
            add = self.stash.add_scene(
                title=f"Scene {n}",
                details=f"Details of scene {n}",
                date="2024-01-02",
                studio=f"Studio {n % 20}",
                performers=[f"P{n % 50}", f"P{(n + 7) % 50}"],
                tags=[f"T{n % 30}", f"T{(n + 3) % 30}"] + ([common_tag] if common_tag else []),
                files=[{"path": f"/stash/media/{name}", "size": 1000 + n, "duration": 60.0}],
            )
            self.scene_ids.append(add if isinstance(add, int) else int(add["id"]))
            self.rating_keys.append(self.plex.add_item(1, f"/plex/media/{name}", size=1000 + n, duration_ms=60000))
        self.stash.set_plugin_settings(
            {
                "Stash2Plex": {
                    "plex_url": self.plex.url,
                    "plex_token": self.plex.token,
                    "path_map": "/stash/media=/plex/media",
                }
            }
        )
        self.plex.latency = LATENCY_S if latency is None else latency
        self.tmp = tempfile.TemporaryDirectory()
        self.data_dir = str(Path(self.tmp.name) / "data")
        self.connection = self.stash.server_connection(str(REPO))
        self.env = dict(os.environ)
        self.env["STASH2PLEX_DATA_DIR"] = self.data_dir
        self.env["PYTHONPATH"] = os.pathsep.join(p for p in (self.env.get("PYTHONPATH"), str(REPO.parent)) if p)

    def next_round(self, round_no: int) -> None:
        """Another full sync to time: a new data folder (no ledger) and every scene's title
        changed in Stash, so each scene again needs its edit and its poster upload."""
        self.data_dir = str(Path(self.tmp.name) / f"data-{round_no}")
        self.env["STASH2PLEX_DATA_DIR"] = self.data_dir
        for n, sid in enumerate(self.scene_ids):
            self.stash.update_scene(sid, title=f"Scene {n} (round {round_no})")

    def _plugin(self, document: dict, sample_every: float | None) -> Run:
        """Exactly as Stash starts it (tests/runner.py's argv from Stash2Plex.yml)."""
        return launch(build_argv(REPO), json.dumps(document).encode(), self.env, sample_every)

    def task(self, mode: str, sample_every: float | None = 0.05) -> Run:
        return self._plugin(task_document(self.connection, mode), sample_every)

    def hook(self, context: dict, sample_every: float | None = None) -> Run:
        return self._plugin(hook_document(self.connection, context), sample_every)

    def close(self) -> None:
        self.stash.stop()
        self._stash_process.shutdown()
        self.plex.stop()
        self.tmp.cleanup()


def ratio(a: float, b: float) -> str:
    return f"{a / b:.2f}x" if b else "-"


# -- hook -------------------------------------------------------------------------------
def bench_hook(runs: int = 21) -> None:
    """``runs`` hooks, each for a scene not yet queued, while a drainer "runs" (the lock is
    held): the hook only queues, as through a bulk edit. The baseline is a trivial plugin (reads
    its stdin, writes its reply) started exactly as Stash starts ours (``Stash2Plex.yml``'s
    exec: ``python -S <script>``), alternating with the hooks."""
    from tests.bench.storm import TRIVIAL_PLUGIN

    print(f"\nHook cost: {runs} hooks, each for a scene not yet queued, alternating with the trivial plugin")
    lab = Lab(2 * runs + IMPORT_RUNS, latency=0)
    try:
        trivial = Path(lab.data_dir).parent / "trivial.py"
        trivial.write_text(TRIVIAL_PLUGIN)
        argv = build_argv()
        baseline = [*argv[:-1], str(trivial)]  # the same interpreter and flags, the trivial script
        document = json.dumps(hook_document(lab.connection, {"id": 1, "type": "Scene.Update.Post"})).encode()
        with drainer_lock_held(Path(lab.data_dir)):  # a drainer "is running": the hook only enqueues
            scene = iter(range(1, 2 * runs + IMPORT_RUNS + 1))
            lab.hook(lab.stash.update_scene(next(scene), title="warm-up"))
            launch(baseline, document, lab.env)
            walls, base = [], []
            for i in range(runs):  # A B A B: drift in the machine's speed hits both alike
                base.append(launch(baseline, document, lab.env).wall)
                run = lab.hook(lab.stash.update_scene(next(scene), title=f"edit {i}"))
                assert run.output and run.output.endswith(" queued") and "already" not in run.output, run.reply
                walls.append(run.wall)
            # Memory in runs of their own: sampling every millisecond costs CPU.
            hook_kb = [
                lab.hook(lab.stash.update_scene(next(scene), title=f"rss {i}"), sample_every=0.001).peak_kb
                for i in range(runs - 1)
            ]
            base_kb = [launch(baseline, document, lab.env, 0.001).peak_kb for _ in range(5)]
            imports = _import_times(lab, argv, baseline, document, scene)
        med, b = statistics.median(walls), statistics.median(base)
        pairs = statistics.median(w / x for w, x in zip(walls, base))
        line(
            "hook wall time (median)",
            f"{med * 1000:.0f} ms",
            f"{b * 1000:.0f} ms trivial plugin",
            ratio(med, b),
            "<= 2.0x",
        )
        line("  median of the pairwise ratios", f"{pairs:.2f}x", "", "")
        line(
            "hook peak RSS (VmHWM, max)",
            f"{max(hook_kb) / 1024:.1f} MB",
            f"{max(base_kb) / 1024:.1f} MB trivial plugin",
            ratio(max(hook_kb), max(base_kb)),
            "<= 25 MB",
        )
        _report_imports(*imports)
    finally:
        lab.close()


IMPORT_RUNS = 5


def _self_times(stderr: str) -> dict[str, float]:
    """Seconds each module's own import took (without what it imported), from ``-X importtime``'s
    lines (``import time: self | cumulative | name``): they add up to the run's import time."""
    found = {}
    for row in stderr.splitlines():
        if row.startswith("import time:") and row.count("|") == 2:
            own, _, name = row[len("import time:") :].split("|")
            if own.strip().isdigit():
                found[name.strip()] = int(own) / 1e6
    return found


def _import_times(lab: Lab, argv: list[str], baseline: list[str], document: bytes, scene) -> tuple:
    """``IMPORT_RUNS`` hooks (each for a scene not yet queued) and trivial plugins, alternating,
    under ``python -X importtime``: what each imports at the top level and what it costs."""
    timed = [argv[0], "-X", "importtime", *argv[1:]]
    timed_base = [baseline[0], "-X", "importtime", *baseline[1:]]
    hooks, trivial = [], []
    for i in range(IMPORT_RUNS):
        trivial.append(_self_times(launch(timed_base, document, lab.env).stderr))
        context = lab.stash.update_scene(next(scene), title=f"imports {i}")
        run = launch(timed, json.dumps(hook_document(lab.connection, context)).encode(), lab.env)
        assert run.output and run.output.endswith(" queued"), run.reply
        hooks.append(_self_times(run.stderr))
    return hooks, trivial


def _report_imports(hooks: list[dict[str, float]], trivial: list[dict[str, float]]) -> None:
    """The hook's imports in parts that add up (each module's own time): ours (the repository's
    packages), json's modules, the rest of what the trivial plugin imports too (the interpreter's
    start), the standard library's beyond it; beside the trivial plugin's, medians of the runs."""
    ours = {p.name.removesuffix(".py") for p in REPO.iterdir() if p.is_dir() or p.suffix == ".py"} - {"tests"}
    base_names = set().union(*trivial)

    def part(name: str) -> str:
        if name.split(".")[0] in ours:
            return "our modules"
        if name.split(".")[0] in ("json", "_json"):
            return "json"
        return "what the trivial plugin imports too" if name in base_names else "stdlib beyond the trivial plugin's"

    names = ("our modules", "json", "what the trivial plugin imports too", "stdlib beyond the trivial plugin's")
    parts: dict[str, list[float]] = {name: [] for name in names}
    for found in hooks:
        for name in names:
            parts[name].append(sum(t for module, t in found.items() if part(module) == name))
    base = statistics.median(sum(found.values()) for found in trivial)
    print(f"  hook imports under -X importtime, each module's own time (median of {len(hooks)}):")
    for name, seconds in parts.items():
        line(f"    {name}", f"{statistics.median(seconds) * 1000:.1f} ms")
    whole = statistics.median(sum(found.values()) for found in hooks)
    line(
        "    all the hook's imports",
        f"{whole * 1000:.1f} ms",
        f"{base * 1000:.1f} ms trivial plugin",
        ratio(whole, base),
    )
    extra = sorted({n for found in hooks for n in found if part(n) == "stdlib beyond the trivial plugin's"})
    print(f"    stdlib modules beyond the trivial plugin's: {', '.join(extra) or 'none'}", flush=True)


# -- queue -------------------------------------------------------------------------------
def _through_adapter(folder: Path, jobs: int) -> float:
    """Seconds to put ``jobs`` jobs through the queue adapter and take and ack them, 50 a take."""
    from sync_queue.job import BULK, Job
    from sync_queue.queue import JobQueue

    queue = JobQueue(folder, consumer=True)
    started = time.perf_counter()
    queue.put_many(Job(scene_id=i + 1, priority=BULK) for i in range(jobs))
    while batch := queue.take(50):
        for item in batch:
            queue.ack(item)
    spent = time.perf_counter() - started
    queue.close()
    return spent


def _through_persist_queue(folder: Path, jobs: int) -> float:
    """The baseline: the same jobs put, got and acked through persist-queue's ``SQLiteAckQueue``
    alone, opened and cleared as the adapter does it (sync_queue/storage.py: JSON, WAL with
    ``synchronous=NORMAL``, one commit a put, the acked rows deleted every ``CLEAR_ACKED_EVERY``
    acks: persist-queue's ``get`` reads past the acked rows, so without it the baseline grows
    with the square of the jobs)."""
    from sync_queue import pq_insides, sqlite
    from sync_queue.job import BULK, Job
    from sync_queue.storage import CLEAR_ACKED_EVERY

    pq = pq_insides.load()
    queue = pq.SQLiteAckQueue(
        str(folder), name=BULK, multithreading=True, timeout=sqlite.BUSY_TIMEOUT_S, serializer=pq.json
    )
    pq_insides.relax_sync(queue)
    started = time.perf_counter()
    for i in range(jobs):
        queue.put(Job(scene_id=i + 1, priority=BULK).to_dict())
    for acks in itertools.count(1):
        try:
            raw = queue.get(block=False, raw=True)
        except pq.Empty:
            break
        queue.ack(id=raw["pqid"])
        if acks % CLEAR_ACKED_EVERY == 0:
            queue.clear_acked_data(max_delete=None, keep_latest=None)
    spent = time.perf_counter() - started
    queue.close()
    return spent


def bench_queue(jobs: int = 10000, pairs: int = 3) -> None:
    """``jobs`` jobs put, taken and acked through the queue adapter, alternating ``pairs`` times
    with the baseline: the same through persist-queue alone (what the adapter adds: one job
    per scene, priorities, the spool's move, retries kept in the row)."""
    print(f"\nQueue cost: {jobs} jobs enqueued and drained through the queue adapter (no Plex), {pairs} pairs")
    ours, bare = [], []
    with tempfile.TemporaryDirectory() as tmp:
        for n in range(pairs):  # A B A B: drift in the machine's speed hits both alike
            ours.append(_through_adapter(Path(tmp) / f"adapter-{n}", jobs) / jobs)
            bare.append(_through_persist_queue(Path(tmp) / f"bare-{n}", jobs) / jobs)
    per_job, base = statistics.median(ours), statistics.median(bare)
    line(
        "queue overhead per job (put+take+ack)",
        f"{per_job * 1e6:.0f} µs",
        f"{base * 1e6:.0f} µs persist-queue alone",
        ratio(per_job, base),
    )
    line("  median of the pairwise ratios", f"{statistics.median(a / b for a, b in zip(ours, bare)):.2f}x")
    line(
        "  against one Plex request", f"{per_job * 1e6:.0f} µs", f"{LATENCY_S * 1e3:.0f} ms", ratio(per_job, LATENCY_S)
    )
    bench_counts()


def bench_counts(jobs: int = 50_000, runs: int = 7) -> None:
    """``counts()`` (queue_status, the page) over a backlog of ``jobs`` waiting jobs, 50 in
    flight, read by another process's queue (a producer); the baseline is one plain read of
    the same rows (their data), alternating with it."""
    from sync_queue import pq_insides
    from sync_queue.job import BULK, INTERACTIVE, PRIORITIES, Job
    from sync_queue.queue import JobQueue

    with tempfile.TemporaryDirectory() as tmp:
        consumer = JobQueue(Path(tmp), consumer=True)
        consumer.put_many(Job(scene_id=i + 1, priority=BULK if i % 3 else INTERACTIVE) for i in range(jobs))
        consumer.take(50)
        look = JobQueue(Path(tmp))
        plain = f"SELECT doc FROM ({pq_insides.rows(list(PRIORITIES))})"
        counts_s, plain_s = [], []
        for _ in range(runs):
            started = time.perf_counter()
            assert look.counts()["pending"] == jobs
            counts_s.append(time.perf_counter() - started)
            started = time.perf_counter()
            look.store.side().execute(plain).fetchall()
            plain_s.append(time.perf_counter() - started)
        look.close()
        consumer.close()
    med, base = statistics.median(counts_s), statistics.median(plain_s)
    line(
        f"counts() over {jobs} waiting jobs (median)",
        f"{med * 1e3:.0f} ms",
        f"{base * 1e3:.0f} ms rows read once",
        ratio(med, base),
    )


# -- bulk ----------------------------------------------------------------------------------
FLOOR = r"""
import json, sys, threading
from concurrent.futures import ThreadPoolExecutor
import requests
url, token, keys, image, concurrency, stash = json.loads(sys.stdin.read())
image = image.encode("latin-1")
local = threading.local()
def session():
    if not hasattr(local, "s"):
        local.s = requests.Session()
        local.s.headers["X-Plex-Token"] = token
        local.s.trust_env = False
    return local.s
def one(n, key):
    s = session()
    params = {"type": "1", "id": str(key), "title.value": f"Floor {n}", "title.locked": "1",
              "summary.value": f"Details of floor {n}", "summary.locked": "1",
              "studio.value": f"Studio {n % 20}", "studio.locked": "1",
              "originallyAvailableAt.value": "2024-01-02", "originallyAvailableAt.locked": "1",
              "genre[0].tag.tag": f"T{n % 30}", "genre[1].tag.tag": f"T{(n + 3) % 30}", "genre.locked": "1",
              "actor[0].tag.tag": f"P{n % 50}", "actor[1].tag.tag": f"P{(n + 7) % 50}", "actor.locked": "1",
              "collection[0].tag.tag": f"Studio {n % 20}", "collection.locked": "1"}
    body = image
    if stash:  # the wire floor: the cover is read from Stash first, as any sync must
        body = s.get(f"{stash}/scene/{n + 1}/screenshot", timeout=15).content
    s.put(f"{url}/library/sections/1/all", params=params, timeout=15).raise_for_status()
    s.post(f"{url}/library/metadata/{key}/posters", data=body, timeout=15).raise_for_status()
with ThreadPoolExecutor(concurrency) as pool:
    list(pool.map(one, range(len(keys)), keys))
"""


def edit_poster_floor(lab: Lab, with_screenshot: bool = False) -> Run:
    """Seconds for a plain loop sending exactly one edit and one poster upload per scene,
    with the plugin's concurrency, against the same emulator: what no sync can beat.
    ``with_screenshot``: the wire floor, each poster first read from Stash (the request a
    sync cannot skip: Stash2Plex uploads the bytes it fetched itself)."""
    image = lab.stash.screenshot_bytes(1).decode("latin-1")
    stash = lab.stash.get_url() if with_screenshot else None
    payload = json.dumps([lab.plex.url, lab.plex.token, lab.rating_keys, image, CONCURRENCY, stash]).encode()
    run = python(FLOOR, payload)
    assert run.returncode == 0, run.stderr[-2000:]
    return run


PAGING = r"""
import json, sys
from stashapi.stashapp import StashInterface
from plexapi.server import PlexServer
conn, plex_url, token = json.loads(sys.stdin.read())
stash = StashInterface(conn)
q = "query($f: FindFilterType){ findScenes(filter: $f){ count scenes { id title details date updated_at studio{name} performers{name} tags{name} files{path size duration} paths{screenshot} } } }"
page, seen = 1, 0
while True:
    r = stash.call_GQL(q, {"f": {"page": page, "per_page": 500, "sort": "id"}})["findScenes"]
    seen += len(r["scenes"])
    if seen >= r["count"] or not r["scenes"]: break
    page += 1
plex = PlexServer(plex_url, token)
start, total = 0, 1
while start < total:
    root = plex.query("/library/sections/1/all?type=1", headers={"X-Plex-Container-Start": str(start), "X-Plex-Container-Size": "500"})
    total = int(root.attrib["totalSize"]); start += 500
"""


def paging_baseline(lab: Lab) -> float:
    """Just paging through Stash's scenes and Plex's listing, with the same clients and page size."""
    payload = json.dumps([lab.connection | {"Host": "127.0.0.1"}, lab.plex.url, lab.plex.token]).encode()
    return python(PAGING, payload).wall


def sync_all(lab: Lab) -> dict:
    """``all`` on a fresh library, between two runs of the floor (their mean is the baseline)."""
    floor_a = edit_poster_floor(lab)
    lab.plex.clear_requests()
    lab.stash.clear_request_logs()
    started = time.time()
    run = lab.task("all")
    assert run.error is None, run.stderr[-2000:]
    counts = request_counts(lab)
    first_edit = first_edit_after(lab, started)
    lab.plex.clear_requests()
    started = time.time()
    floor_b = edit_poster_floor(lab)
    result = floors(run, floor_a, floor_b, counts)
    result["first_edit"], result["floor_first_edit"] = first_edit, first_edit_after(lab, started)
    result["wire_floor"] = edit_poster_floor(lab, with_screenshot=True).wall
    return result


def first_edit_after(lab: Lab, started: float) -> float:
    """Seconds from a process's start to the first edit the Plex emulator received."""
    return min(r["time"] for r in lab.plex.edit_requests()) - started


def floors(run: Run, a: Run, b: Run, counts: dict) -> dict:
    return {
        "run": run,
        "floor": (a.wall + b.wall) / 2,
        "floor_cpu": (a.cpu + b.cpu) / 2,
        "synced": run.output["synced"],
        **counts,
    }


def request_counts(lab: Lab) -> dict:
    return {
        "edits": len(lab.plex.edit_requests()),
        "uploads": len(lab.plex.upload_requests()),
        "plex_reads": len(lab.plex.requests_matching("GET", "/library/metadata/")),
        "pages": lab.stash.graphql_count("S2PScenesAfter"),
        "by_id": lab.stash.graphql_count("S2PScenesById"),
        "screenshots": lab.stash.screenshot_count(),
    }


def report_all(lab: Lab, r: dict, target: str) -> None:
    run, floor, synced = r["run"], r["floor"], r["synced"]
    line(
        "'all' wall time",
        f"{run.wall:.1f} s",
        f"{floor:.1f} s edit+poster floor",
        ratio(run.wall, floor),
        target,
    )
    line(
        "  CPU seconds of the process",
        f"{run.cpu:.1f} s",
        f"{r['floor_cpu']:.1f} s the floor's",
        ratio(run.cpu, r["floor_cpu"]),
        "(the floor's work is the wire alone)",
    )
    if "wire_floor" in r:
        line(
            "  'all' vs screenshot+edit+poster floor",
            f"{run.wall:.1f} s",
            f"{r['wire_floor']:.1f} s wire floor",
            ratio(run.wall, r["wire_floor"]),
            "(the 3 requests a changed scene needs)",
        )
    line("  scenes synced per second", f"{synced / run.wall:.0f}/s", f"{lab.scenes / floor:.0f}/s floor", "")
    if "first_edit" in r:
        line(
            "  first edit after the process started",
            f"{r['first_edit']:.2f} s",
            f"{r['floor_first_edit']:.2f} s the floor's",
            ratio(r["first_edit"], r["floor_first_edit"]),
            "(start-up: imports, settings, Plex's listing)",
        )
    per = max(synced, 1)
    line("  Plex edits / uploads per changed scene", f"{r['edits'] / per:.2f} / {r['uploads'] / per:.2f}")
    line("  Plex detail reads (GET, 50 items each)", f"{r['plex_reads']}", "", "")
    line(
        "  Stash: pages / by-id / screenshots",
        f"{r['pages']} / {r['by_id']} / {r['screenshots']}",
        f"{-(-lab.scenes // 500)} pages of 500",
        "",
        "1 screenshot per changed scene",
    )
    line("  task peak RSS (VmHWM)", f"{run.peak_kb / 1024:.0f} MB", "", "")


def bench_bulk(scenes: int = 2000, rounds: int = 5) -> dict:
    print(
        f"\nBulk sync: 'all' over {scenes} scenes, Plex latency {LATENCY_S * 1000:.0f} ms per request; "
        f"{rounds} rounds, each between two floor runs (the median round is shown)"
    )
    lab = Lab(scenes)
    try:
        done = []
        for n in range(rounds):
            if n:
                lab.next_round(n)
            done.append(sync_all(lab))
        by_ratio = sorted(done, key=lambda r: r["run"].wall / r["floor"])
        r = by_ratio[len(by_ratio) // 2]
        report_all(lab, r, "<= 1.2x")
        line(
            "  every round's ratio to its floor",
            " ".join(f"{x['run'].wall / x['floor']:.2f}x" for x in done),
            "",
            "",
            "machine noise: compare rounds",
        )
        bases, agains = [], []
        lab.plex.clear_requests()
        for _ in range(3):  # a second or so each: one run alone is mostly the machine's noise
            bases.append(paging_baseline(lab))
            again = lab.task("all")
            assert again.error is None, again.stderr[-2000:]
            agains.append(again.wall)
        writes = len(lab.plex.edit_requests()) + len(lab.plex.upload_requests())
        base, again_wall = statistics.median(bases), statistics.median(agains)
        line(
            "no-change resync wall time (median of 3)",
            f"{again_wall:.2f} s",
            f"{base:.2f} s paging Stash+Plex",
            ratio(again_wall, base),
            "<= 1.5x",
        )
        line("  each run's ratio to its baseline", " ".join(f"{a / b:.2f}x" for a, b in zip(agains, bases)))
        line("  Plex writes (3 runs)", f"{writes}", "", "", "0")
        return {"wall": r["run"].wall, "scenes": scenes}
    finally:
        lab.close()


def bench_scale(scenes: int = 20000, small: dict | None = None, edit_during: bool = True, floor: bool = True) -> dict:
    """``all`` over ``scenes``; ``floor=False`` (the 100,000-scene run) skips the two floor
    runs and reports time per scene against ``small`` and peak memory only."""
    print(f"\nScale: 'all' over {scenes} scenes" + (", and a user's edit while it runs" if edit_during else ""))
    lab = Lab(scenes)
    try:
        floor_a = edit_poster_floor(lab) if floor else None
        lab.plex.clear_requests()
        lab.stash.clear_request_logs()
        result: dict = {}
        worker = threading.Thread(target=lambda: result.setdefault("run", lab.task("all")))
        started = time.time()
        worker.start()
        latency = _edit_during(lab, scenes, worker) if edit_during else None
        worker.join()
        run = result["run"]
        assert run.error is None, run.stderr[-2000:]
        counts = request_counts(lab)
        if floor_a is not None:
            report_all(lab, floors(run, floor_a, edit_poster_floor(lab), counts), "<= 1.2x")
        else:
            line("'all' wall time", f"{run.wall:.0f} s", f"{run.output['synced']:,} synced", "")
            line("  task peak RSS (VmHWM)", f"{run.peak_kb / 1024:.0f} MB", "", "")
        line("  first edit after the task started", f"{first_edit_after(lab, started):.2f} s", "", "", "<= 2 s")
        if latency is not None:
            line("  a user's edit reaches Plex during 'all'", f"{latency:.2f} s", f"{run.wall:.0f} s backlog", "")
        if small:
            per = (run.wall / scenes) / (small["wall"] / small["scenes"])
            line(
                f"  time per scene vs {small['scenes']:,} scenes",
                f"{run.wall:.0f} s",
                f"{small['wall']:.1f} s for {small['scenes']:,}",
                f"{per:.2f}x",
                "~1.0x (linear)",
            )
        return {"wall": run.wall, "scenes": scenes}
    finally:
        lab.close()


def _edit_during(lab: Lab, scenes: int, worker: threading.Thread) -> float:
    """Seconds for a user's edit of a scene on the last page to reach Plex while ``all`` runs."""
    time.sleep(min(15.0, scenes / 2000))
    sid = scenes - 5  # the last page: without priority it would wait for the whole backlog
    rk = lab.rating_keys[sid - 1]
    edited_at = time.perf_counter()
    hook = lab.hook(lab.stash.update_scene(sid, title="Edited while all runs"))
    assert hook.error is None, hook.reply
    while lab.plex.item(rk)["fields"]["title"] != "Edited while all runs" and worker.is_alive():
        time.sleep(0.05)
    return time.perf_counter() - edited_at


# -- pacing --------------------------------------------------------------------------------
def bench_pacing(scenes: int = 2000, slow: float = 0.200) -> None:
    print(
        f"\nPacing: 'all' over {scenes} scenes; Plex latency rises from {LATENCY_S * 1000:.0f} to {slow * 1000:.0f} ms"
    )
    lab = Lab(scenes)
    try:
        result: dict = {}
        worker = threading.Thread(target=lambda: result.setdefault("run", lab.task("all")))
        started = time.perf_counter()
        worker.start()
        while len(lab.plex.upload_requests()) < scenes // 3 and worker.is_alive():
            time.sleep(0.05)
        switched, done_before = time.perf_counter(), len(lab.plex.upload_requests())
        fast_rate = done_before / (switched - started)
        lab.plex.latency = slow
        worker.join()
        run = result["run"]
        assert run.error is None, run.stderr[-2000:]
        slow_rate = (len(lab.plex.upload_requests()) - done_before) / (time.perf_counter() - switched)
        errors = [r for r in lab.plex.requests if r["status"] >= 400]
        floor = CONCURRENCY / (2 * slow)  # the edit+poster floor at the slow latency
        out = run.output
        line("scenes/s before Plex slowed", f"{fast_rate:.1f}/s", "", "")
        line(
            "scenes/s after Plex slowed",
            f"{slow_rate:.1f}/s",
            f"{floor:.1f}/s edit+poster floor",
            ratio(slow_rate, floor),
            "<= 1.0x: never more in flight than allowed",
        )
        line(
            "  failed / retried / Plex errors",
            f"{out['failed']} / {out['retrying']} / {len(errors)}",
            f"{out['synced']} synced",
            "",
            "0 / 0 / 0",
        )
    finally:
        lab.close()


def _queue_counts(lab: Lab) -> dict:
    from sync_queue.queue import JobQueue

    queue = JobQueue(Path(lab.env["STASH2PLEX_DATA_DIR"]) / "queue")
    try:
        return queue.counts()
    finally:
        queue.close()


def bench_entity(scenes: int = 5000, runs: int = 9) -> None:
    """A tag on every scene renamed: the hook's cost, the queue's size, and the fan-out against 'all'."""
    print(f"\nEntity change: a tag carried by all {scenes} scenes renamed, Plex latency {LATENCY_S * 1000:.0f} ms")
    lab = Lab(scenes, common_tag="Everywhere")
    try:
        assert lab.task("all").error is None
        tag = lab.stash.entity_id("tag", "Everywhere")
        with drainer_lock_held(lab.env["STASH2PLEX_DATA_DIR"]):  # a drainer "is running": hooks only record
            scene_walls = [lab.hook(lab.stash.update_scene(1 + i, title=f"edit {i}")).wall for i in range(runs)]
            entity_walls = []
            for i in range(runs):
                run = lab.hook(lab.stash.rename_entity("tag", tag, f"Everywhere {i}"))
                assert run.error is None, run.stderr
                entity_walls.append(run.wall)
            counts = _queue_counts(lab)
        scene_med, entity_med = statistics.median(scene_walls), statistics.median(entity_walls)
        line(
            "entity hook wall time (median)",
            f"{entity_med * 1000:.0f} ms",
            f"{scene_med * 1000:.0f} ms scene hook",
            f"{entity_med / scene_med:.2f}x",
            "<= 1.1x of a scene hook",
        )
        line(f"queue rows after {runs} renames", f"{counts['entity_events']} event", f"{scenes} scenes", "", "1 row")
        peak = {"bulk": 0}
        done = threading.Event()

        def watch() -> None:
            while not done.wait(0.25):
                peak["bulk"] = max(peak["bulk"], _queue_counts(lab)["bulk"])

        watcher = threading.Thread(target=watch, daemon=True)
        watcher.start()
        lab.plex.clear_requests()
        fan = lab.task("process_queue")
        done.set()
        watcher.join()
        assert fan.error is None, fan.stderr[-2000:]
        fan_edits = len(lab.plex.edit_requests())
        lab.stash.rename_entity("tag", tag, "Everywhere again")  # the same change, without the hook
        lab.plex.clear_requests()
        full = lab.task("all")
        line(
            "fan-out of one rename, drained",
            f"{fan.wall:.1f} s",
            f"{full.wall:.1f} s 'all'",
            f"{fan.wall / full.wall:.2f}x",
            "about 'all' doing the same writes",
        )
        line("edits (fan-out / 'all')", f"{fan_edits} / {len(lab.plex.edit_requests())}", "", "", f"{scenes} each")
        line("bulk jobs queued at once (peak)", f"{peak['bulk']}", f"{scenes} scenes", "", "<= one batch or two")
    finally:
        lab.close()


def bench_reconcile(scenes: int = 2000) -> None:
    print(f"\nReconcile: {scenes} unchanged scenes checked against Plex, latency {LATENCY_S * 1000:.0f} ms")
    lab = Lab(scenes)
    try:
        assert lab.task("all").error is None
        base = paging_baseline(lab)
        lab.plex.clear_requests()
        run = lab.task("reconcile")
        assert run.error is None, run.stderr[-2000:]
        reads = len([r for r in lab.plex.requests if r["path"].startswith("/library/metadata/")])
        writes = len(lab.plex.edit_requests()) + len(lab.plex.upload_requests())
        line(
            "reconcile wall time",
            f"{run.wall:.2f} s",
            f"{base:.2f} s paging",
            f"{run.wall / base:.2f}x",
            "listing + Stash paging + 1 read per 50",
        )
        line("Plex detail reads / writes", f"{reads} / {writes}", f"{scenes / 50:.0f} reads", "", "~1 per 50, 0 writes")
    finally:
        lab.close()


def bench_inbox(unmatched: int = 5000, runs: int = 5) -> None:
    """The match inbox with ``unmatched`` dead-lettered scenes: the page's first read
    (``ui_inbox``, one plugin run as Stash's runPluginOperation starts it) beside
    ``ui_status`` (the page's other read, the same process start)."""
    from sync_queue.dlq import DeadLetterQueue
    from sync_queue.job import Job

    print(f"\nMatch inbox: {unmatched} unmatched scenes (path_map wrong for all), median of {runs} runs")
    lab = Lab(unmatched, latency=0)
    try:
        lab.stash.set_plugin_settings(
            {"Stash2Plex": {"plex_url": lab.plex.url, "plex_token": lab.plex.token, "path_map": "/elsewhere=/plex"}}
        )
        dlq = DeadLetterQueue(Path(lab.data_dir))
        for n, sid in enumerate(lab.scene_ids):
            dlq.add(Job(scene_id=sid, attempt=4), "PlexNotFound", f"not in Plex: scene {n}", f"Scene {n}")
        dlq.close()

        def op(**args) -> Run:
            run = lab._plugin({"server_connection": lab.connection, "args": args}, None)
            assert run.error is None, run.stderr[-2000:]
            return run

        first = op(mode="ui_inbox")  # lists Plex's library into the index cache
        walls = {"inbox": [], "search": [], "last": [], "status": []}
        for _ in range(runs):
            walls["inbox"].append(op(mode="ui_inbox").wall)
            walls["search"].append(op(mode="ui_inbox", query="scene 4999").wall)
            walls["last"].append(op(mode="ui_inbox", page=str(unmatched // 10)).wall)
            walls["status"].append(op(mode="ui_status").wall)
        med = {k: statistics.median(v) for k, v in walls.items()}
        base = f"{med['status']:.2f} s ui_status"
        line("inbox, first page (Plex listed first)", f"{first.wall:.2f} s", base, ratio(first.wall, med["status"]))
        line("inbox, first page", f"{med['inbox']:.2f} s", base, ratio(med["inbox"], med["status"]), "< 2 s")
        line("inbox, searched", f"{med['search']:.2f} s", base, ratio(med["search"], med["status"]), "< 2 s")
        line("inbox, last page", f"{med['last']:.2f} s", base, ratio(med["last"], med["status"]), "< 2 s")
    finally:
        lab.close()


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python tests/bench/bench.py",
        description="Stash2Plex benchmarks against the emulators; every figure beside a same-run baseline.",
    )
    parser.add_argument(
        "sections",
        nargs="*",
        metavar="SECTION",
        help=f"what to measure, any of: {', '.join(SECTIONS + MORE_SECTIONS)} (default: {' '.join(SECTIONS)})",
    )
    parser.add_argument("--storm-saves", type=int, default=200, help="scene saves of the 'storm' run (default 200)")
    parser.add_argument(
        "--realistic-scenes", type=int, default=2000, help="scenes of the 'realistic' run (default 2000)"
    )
    parser.add_argument(
        "--realistic-sweep-scenes",
        type=int,
        default=500,
        help="scenes of each point of the 'realistic' concurrency sweep (default 500)",
    )
    parser.add_argument("--small-scenes", type=int, default=80, help="scenes of each 'small' run (default 80)")
    parser.add_argument("--scale-scenes", type=int, default=20000, help="scenes of the 'scale' run (default 20000)")
    parser.add_argument(
        "--plex-latency-ms",
        type=float,
        default=LATENCY_S * 1000,
        help=f"the Plex emulator's latency per request (default {LATENCY_S * 1000:.0f}; a real Plex: 20-100)",
    )
    parser.add_argument(
        "--listen-scenes", type=int, default=50, help="files Plex adds in the 'listen' run (default 50)"
    )
    parser.add_argument(
        "--watch-seconds", type=float, default=60.0, help="the idle window of 'listen's resident watch (default 60)"
    )
    parser.add_argument("--rounds", type=int, default=5, help="rounds of the 'bulk' run (default 5)")
    parser.add_argument(
        "--huge", action="store_true", help="also run 'all' over 100,000 scenes (time ratio to the scale run)"
    )
    args = parser.parse_args(argv)
    unknown = [s for s in args.sections if s not in SECTIONS + MORE_SECTIONS]
    if unknown:
        parser.error(f"unknown section {', '.join(unknown)}; choose from {', '.join(SECTIONS + MORE_SECTIONS)}")
    return args


def main(argv: list[str]) -> int:
    global LATENCY_S
    args = parse_args(argv)
    LATENCY_S = args.plex_latency_ms / 1000
    sections = args.sections or list(SECTIONS)
    compile_plugin()  # as after the plugin's first run in a real install
    print(f"Stash2Plex benchmarks on {platform.platform()}, Python {platform.python_version()}, {os.cpu_count()} cores")
    print("A shared, noisy machine: read each figure against its baseline from this same run.")
    line("figure", "value", "baseline (same run)", "ratio", "target")
    small = scale = None
    for section in sections:
        if section == "hook":
            bench_hook()
        elif section == "queue":
            bench_queue()
        elif section == "bulk":
            small = bench_bulk(rounds=args.rounds)
        elif section == "scale":
            scale = bench_scale(args.scale_scenes, small)
        elif section == "pacing":
            bench_pacing()
        elif section == "storm":
            from tests.bench.storm import bench_storm

            bench_storm(launch, build_argv, Lab, line, ratio, REPO, args.storm_saves)
        elif section == "realistic":
            from tests.bench.realistic import bench_realistic

            bench_realistic(args.realistic_scenes, args.realistic_sweep_scenes)
        elif section == "small":
            from tests.bench.small_plex import bench_small_plex

            bench_small_plex(args.small_scenes)
        elif section == "entity":
            bench_entity()
        elif section == "reconcile":
            bench_reconcile()
        elif section == "listen":
            from tests.bench.listen import bench_listen

            bench_listen(Lab, line, REPO, args.listen_scenes, args.watch_seconds)
        elif section == "inbox":
            bench_inbox()
    if args.huge:
        bench_scale(100_000, scale, edit_during=False, floor=False)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
