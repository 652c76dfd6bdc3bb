"""Peak memory of every process of a command's tree (Ray's raylet and workers included: they descend
from the driver that started them; `/usr/bin/time` only sees the driver)."""
from __future__ import annotations

import subprocess
import threading
import time

import psutil


def run_sampled(cmd: list[str], *, interval: float = 0.1, timeout: float = 1200, **kw) -> tuple[int, dict[str, int]]:
    """Run `cmd`; returns (exit code, peak RSS in bytes per process, keyed by `pid name cmdline-head`)."""
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, **kw)
    root = psutil.Process(proc.pid)
    peaks: dict[str, int] = {}
    done = threading.Event()

    def sample():
        while not done.is_set():
            try:
                tree = [root, *root.children(recursive=True)]
            except psutil.NoSuchProcess:
                break
            for p in tree:
                try:
                    key = f"{p.pid} {p.name()} {' '.join(p.cmdline()[:3])[:80]}"
                    peaks[key] = max(peaks.get(key, 0), p.memory_info().rss)
                except (psutil.NoSuchProcess, psutil.AccessDenied):
                    continue
            time.sleep(interval)

    t = threading.Thread(target=sample, daemon=True)
    t.start()
    try:
        out, _ = proc.communicate(timeout=timeout)
    finally:
        done.set()
        t.join()
    run_sampled.output = out.decode("utf-8", "replace")
    return proc.returncode, peaks
