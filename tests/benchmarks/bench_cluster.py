"""Cluster benchmarks for reports/benchmarks/cluster.md.

    python tests/benchmarks/bench_cluster.py overlap [--recipe recipes/demo.yaml] [--workers 2] [--repeats 1]
    python tests/benchmarks/bench_cluster.py faults  [--recipe recipes/text.yaml]

`overlap`: the recipe on the embedded Ray executor, scheduled by the graph (a node starts when its deps
are done) and with stage barriers (`execute(barriers=True)`: the schedule before graph scheduling), the
modes alternating; wall time of each run and whether every pair of outputs is identical
(tests/benchmarks/compare_outputs.py).

`faults`: a `ray start` cluster (head + worker-1 + worker-2, one CPU each, token auth, loopback only in a
private network namespace: tests/raystart.py) runs the recipe once undisturbed, then once losing
one worker's raylet during signatures, then (once worker-3, 2 CPUs, has joined) another's during tokenize
(`tests.raystart.fault_steps`); wall times, what was killed and when, the retries the ledger recorded,
tasks per node, and byte-identity of both runs against a local run.

Each mode prints a Markdown table and writes its figures as JSON next to the outputs (`--work`).
"""
from __future__ import annotations

import argparse
import json
import os
import secrets
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from tests.benchmarks.compare_outputs import compare  # noqa: E402
from tests.raystart import FAST_HEALTH_CHECKS, fault_steps  # noqa: E402


def _curate(*args: str) -> list[str]:
    return [sys.executable, "-m", "curation.commands.cli", *args]


def _one(recipe: str, out: str, workers: int, barriers: bool) -> float:
    """One run in a fresh process (its own embedded Ray); returns its wall seconds."""
    code = ("import sys, time; from curation.commands.run import run; t = time.perf_counter(); "
            f"run({recipe!r}, {out!r}, workers={workers}, executor='ray', progress=False, barriers={barriers}); "
            "print(time.perf_counter() - t)")
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO)
    if p.returncode:
        raise SystemExit(f"run failed ({'barriers' if barriers else 'graph'}):\n{p.stderr[-3000:]}")
    return float(p.stdout.strip().splitlines()[-1])


def overlap(a) -> dict:
    work = Path(a.work)
    rows = []
    for i in range(a.repeats):
        for barriers in (True, False):
            out = work / f"{'barriers' if barriers else 'graph'}-{i}"
            shutil.rmtree(out, ignore_errors=True)
            rows.append({"mode": "stage barriers" if barriers else "graph", "repeat": i,
                         "seconds": round(_one(a.recipe, str(out), a.workers, barriers), 1), "out": str(out)})
            print(rows[-1], file=sys.stderr)
    problems = []
    for r in rows[1:]:
        problems += [f"{r['out']}: {p}" for p in compare(Path(rows[0]["out"]), Path(r["out"]))]
    result = {"recipe": a.recipe, "workers": a.workers, "runs": rows, "identical": not problems,
              "problems": problems[:20], "load": os.getloadavg(), "cpus": os.cpu_count()}
    print("| mode | run | wall s |\n|---|---|---|")
    for r in rows:
        print(f"| {r['mode']} | {r['repeat'] + 1} | {r['seconds']} |")
    print(f"\noutputs identical across all runs: {result['identical']}")
    return result


def faults(a) -> dict:
    work = Path(a.work)
    work.mkdir(parents=True, exist_ok=True)
    local = work / "local"
    shutil.rmtree(local, ignore_errors=True)
    t = time.perf_counter()
    subprocess.run(_curate("run", a.recipe, "--out", str(local), "--executor", "local", "-q"), check=True, cwd=REPO)
    local_s = time.perf_counter() - t
    tmp = Path(tempfile.mkdtemp(prefix="bench-cluster-", dir=work))
    token = tmp / "token"
    token.write_text(secrets.token_hex(32))
    (tmp / "home").mkdir()
    nodes = {"RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN_PATH": str(token), "PYTHONPATH": str(REPO)}
    driver = {"HOME": str(tmp / "home"), "PYTHONPATH": str(REPO), "RAY_AUTH_TOKEN_PATH": str(token)}
    run = lambda out: _curate("run", str(REPO / a.recipe), "--out", str(tmp / out),  # noqa: E731
                              "--address", "127.0.0.1:6379")
    ray_tmp = tempfile.mkdtemp(prefix="bc-", dir="/tmp")
    plan = {"tmp": str(tmp), "ray_tmp": ray_tmp, "port": 6379, "steps": [
        {"node": "head", "head": True, "env": {**nodes, **FAST_HEALTH_CHECKS}},
        {"node": "worker-1", "env": nodes},
        {"node": "worker-2", "env": nodes},
        {"run": "undisturbed", "cmd": run("undisturbed"), "env": driver, "unset": ["RAY_AUTH_MODE"]},
        *fault_steps("faulted", run("faulted"), driver, ["RAY_AUTH_MODE"], nodes),
    ]}
    (tmp / "plan.json").write_text(json.dumps(plan))
    try:
        subprocess.run(["unshare", "-n", sys.executable, "-m", "tests.raystart", str(tmp / "plan.json"),
                        str(tmp / "result.json")], cwd=REPO, check=True, timeout=3600)
    finally:
        shutil.rmtree(ray_tmp, ignore_errors=True)
    res = json.loads((tmp / "result.json").read_text())
    if "error" in res:
        raise SystemExit(f"cluster plan failed: {res['error']}")
    import pyarrow.parquet as pq
    out = {"recipe": a.recipe, "local_seconds": round(local_s, 1), "load": os.getloadavg(), "cpus": os.cpu_count()}
    for name in ("undisturbed", "faulted"):
        r = res[name]
        if r["rc"]:
            raise SystemExit(f"{name} failed:\n{r['stderr'][-3000:]}")
        per_node = next((x.removeprefix("cluster: tasks per node: ") for x in r["stderr"].splitlines()
                         if x.startswith("cluster: tasks per node: ")), "")
        retries = pq.read_table(tmp / name / "ledger" / "task_retries.parquet").to_pylist()
        out[name] = {"seconds": r["seconds"], "tasks_per_node": per_node,
                     "retries": [{k: x[k] for k in ("node", "attempt", "error")} for x in retries],
                     "identical_to_local": not compare(local, tmp / name)}
    out["kills"] = {k: v for k, v in res.items() if k.startswith("kill-")}
    print("| run | wall s | retries | tasks per node | identical to local |\n|---|---|---|---|---|")
    for name in ("undisturbed", "faulted"):
        r = out[name]
        print(f"| {name} | {r['seconds']} | {len(r['retries'])} | {r['tasks_per_node']} | {r['identical_to_local']} |")
    for k, v in out["kills"].items():
        print(f"{k}: {v['task']} at {v['seconds']} s into the run ({v['processes']} processes)")
    print(f"local executor: {out['local_seconds']} s")
    return out


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="mode", required=True)
    o = sub.add_parser("overlap")
    o.add_argument("--recipe", default="recipes/demo.yaml")
    o.add_argument("--workers", type=int, default=2)
    o.add_argument("--repeats", type=int, default=1)
    o.add_argument("--work", default="/tmp/bench-cluster/overlap")
    f = sub.add_parser("faults")
    f.add_argument("--recipe", default="recipes/text.yaml")
    f.add_argument("--work", default="/tmp/bench-cluster/faults")
    a = p.parse_args()
    result = overlap(a) if a.mode == "overlap" else faults(a)
    Path(a.work).mkdir(parents=True, exist_ok=True)
    (Path(a.work) / "result.json").write_text(json.dumps(result, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
