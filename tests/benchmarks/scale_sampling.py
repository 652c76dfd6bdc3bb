"""Memory of every process of a run's tree, per phase: psutil samples and the run's completion markers.

`sample_run(cmd)` starts the command and samples the RSS of every process of its tree every 0.2 s
(Ray's raylet, GCS and workers descend from the driver that started them; `/usr/bin/time` sees only
the driver). Each sample is attributed to the phase running at that moment. Phases run one after
another (`curation.runtime.execute`), so a phase's window is (last marker of the previous stage, last
marker of its own]: every node writes `<out>/work/markers/<phase>/...json` when it completes. Before the
first stage, "start" (recipe, plan, input hashing, Ray start-up), after the last one, "finish"
(ledger, manifests, report). A process's role comes from its command line: the driver, `raylet`,
`gcs_server`, a Ray worker (`default_worker.py`, titles `ray::...`) or another Ray helper.
"""
from __future__ import annotations

import subprocess
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import psutil

INTERVAL = 0.2


def role(proc: psutil.Process, root: int) -> str:
    if proc.pid == root:
        return "driver"
    try:
        name, cmd = proc.name(), " ".join(proc.cmdline())
    except (psutil.NoSuchProcess, psutil.AccessDenied):
        return "gone"
    if "default_worker.py" in cmd or name.startswith("ray::") or cmd.startswith("ray::"):
        return "ray worker"   # before raylet: a worker's arguments name the raylet's socket
    if name == "raylet" or cmd.split(" ")[0].endswith("/raylet"):
        return "raylet"
    if name == "gcs_server" or cmd.split(" ")[0].endswith("/gcs_server"):
        return "gcs_server"
    if "ray" in cmd:
        return "ray helper"
    return "other"


@dataclass
class Sampled:
    returncode: int
    wall: float
    start: float
    samples: dict[int, list[tuple[float, int]]] = field(default_factory=dict)   # pid -> (time, rss)
    roles: dict[int, str] = field(default_factory=dict)
    lines: list[tuple[float, str]] = field(default_factory=list)                 # output, time stamped

    @property
    def output(self) -> str:
        return "".join(line for _, line in self.lines)

    def ready(self) -> float:
        """When the executor was up: the first Ray worker seen, else the driver's `executor:` line."""
        workers = [pts[0][0] for pid, pts in self.samples.items() if self.roles.get(pid) == "ray worker"]
        said = [t for t, line in self.lines if line.startswith("executor:")]
        return min(workers) if workers else (said[0] if said else self.start)


def sample_run(cmd: list[str], *, cwd: Path | None = None, env: dict | None = None,
               timeout: float = 7200) -> Sampled:
    start = time.time()
    proc = subprocess.Popen(cmd, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    root = psutil.Process(proc.pid)
    res = Sampled(0, 0.0, start)
    done = threading.Event()

    def loop():
        while not done.is_set():
            now = time.time()
            try:
                tree = [root, *root.children(recursive=True)]
            except psutil.NoSuchProcess:
                break
            for p in tree:
                if p.pid not in res.roles or res.roles[p.pid] in ("ray helper", "other"):
                    res.roles[p.pid] = role(p, proc.pid)   # a fresh worker may not show its title yet
                try:
                    rss = p.memory_info().rss
                except (psutil.NoSuchProcess, psutil.AccessDenied):
                    continue
                res.samples.setdefault(p.pid, []).append((now, rss))
            done.wait(INTERVAL)

    def read():
        for raw in proc.stdout:
            res.lines.append((time.time(), raw.decode("utf-8", "replace")))

    threads = [threading.Thread(target=loop, daemon=True), threading.Thread(target=read, daemon=True)]
    for t in threads:
        t.start()
    try:
        proc.wait(timeout=timeout)
    finally:
        done.set()
        for t in threads:
            t.join()
    res.returncode, res.wall = proc.returncode, time.time() - start
    return res


def phase_windows(out: Path, order: list[str], start: float, ready: float,
                  end: float) -> list[tuple[str, float, float]]:
    """(phase, from, to) for the stages in `order` that wrote markers, plus "start" (until the executor
    is `ready`) and "finish"."""
    ends = {}
    markers = out / "work" / "markers"
    for phase in order:   # a node's marker is markers/<phase>/<source>/<shard>.json, or <phase>.json alone
        times = [p.stat().st_mtime for p in [*(markers / phase).rglob("*.json"), markers / f"{phase}.json"]
                 if p.is_file()]
        if times:
            ends[phase] = max(times)
    windows, t = [("start", start, ready)], ready
    for phase in order:
        if phase not in ends:
            continue
        windows.append((phase, t, ends[phase]))
        t = ends[phase]
    windows.append(("finish", t, end))
    return windows


def per_phase(res: Sampled, windows: list[tuple[str, float, float]]) -> dict[str, dict[str, float]]:
    """phase -> {"seconds", and per role the peak RSS in MB over the processes of that role}."""
    table = {}
    for phase, lo, hi in windows:
        row = {"seconds": hi - lo}
        for pid, pts in res.samples.items():
            peak = max((rss for t, rss in pts if lo <= t <= hi), default=0)
            if peak:
                r = res.roles.get(pid, "other")
                row[r] = max(row.get(r, 0.0), peak / 2**20)
        table[phase] = row
    return table


def per_process(res: Sampled) -> list[tuple[str, int, float]]:
    """(role, pid, peak RSS MB) of every process seen, largest first."""
    rows = [(res.roles.get(pid, "other"), pid, max(r for _, r in pts) / 2**20) for pid, pts in res.samples.items()]
    return sorted(rows, key=lambda r: -r[2])
