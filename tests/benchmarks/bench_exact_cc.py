"""Per-task peak memory of exact dedup's stages after the keys (reports/benchmarks/cc.md, "Exact and URL dedup").

    PYTHONPATH=<tree> python tests/benchmarks/bench_exact_cc.py RECIPE RUN_DIR [--json FILE]

RUN_DIR: a finished `curate run RECIPE` of the same tree (copy it first: the tasks rewrite their files,
the same bytes). Every task of the exact phase from `exact_part` on is run again, in plan order, each in
its own Python process, twice: once for the process's peak resident memory (VmHWM of /proc/self/status,
and the same after the imports, before the task: the baseline), once under tracemalloc for the peak of
the Python and NumPy allocations the task call makes (the data it holds, without the interpreter).
Works on main's code (exact_part → exact) and on the partitioned components (exact_part → exact_scatter
→ exact_round → exact_settle → exact_resolve → exact) alike: nodes come from the tree's own planner.
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import subprocess
import sys
from pathlib import Path

CHILD = r"""
import json, sys, time, tracemalloc
from pathlib import Path
from curation.core.node import Node
from curation.plan.phases import stage_runners

def hwm():
    for line in open("/proc/self/status"):
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024
d = json.loads(sys.stdin.read())
fn = stage_runners()[d["node"]["phase"]]
node = Node(**d["node"])
base = hwm()
if d["traced"]:
    tracemalloc.start()
t = time.perf_counter()
payload = fn(Path(d["out"]), node)
res = {"seconds": time.perf_counter() - t, "import_hwm": base, "hwm": hwm()}
if d["traced"]:
    res["traced_peak"] = tracemalloc.get_traced_memory()[1]
res["payload"] = {k: v for k, v in payload.items() if k != "outputs"}
print(json.dumps(res))
"""


def measure(out: Path, node, traced: bool) -> dict:
    d = {"out": str(out), "node": dataclasses.asdict(node), "traced": traced}
    r = subprocess.run([sys.executable, "-c", CHILD], input=json.dumps(d), capture_output=True, text=True, check=True)
    return json.loads(r.stdout.strip().splitlines()[-1])


def main() -> None:
    from curation.plan.graph import load_plan

    ap = argparse.ArgumentParser()
    ap.add_argument("recipe", type=Path)
    ap.add_argument("run", type=Path)
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()
    plan = load_plan(args.recipe)
    nodes = [n for stage in plan.stages for n in stage.nodes if n.phase.startswith("exact") and n.phase != "exact_keys"]
    rows = []
    for node in nodes:
        plain, traced = measure(args.run, node, False), measure(args.run, node, True)
        rows.append({"task": node.key, "phase": node.phase, "hwm_mb": plain["hwm"] / 1e6,
                     "import_hwm_mb": plain["import_hwm"] / 1e6, "traced_peak_mb": traced["traced_peak"] / 1e6,
                     "seconds": plain["seconds"], "payload": plain["payload"]})
        r = rows[-1]
        print(f"{r['task']:40s} VmHWM {r['hwm_mb']:7.1f} MB (imports {r['import_hwm_mb']:6.1f})  "
              f"traced peak {r['traced_peak_mb']:7.2f} MB  {r['seconds']:6.2f} s  {r['payload']}", flush=True)
    by: dict[str, list[dict]] = {}
    for r in rows:
        by.setdefault(r["phase"], []).append(r)
    for phase, rs in by.items():
        print(f"{phase:14s} {len(rs):3d} tasks  largest VmHWM {max(r['hwm_mb'] for r in rs):7.1f} MB  "
              f"largest traced peak {max(r['traced_peak_mb'] for r in rs):7.2f} MB")
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1) + "\n")


if __name__ == "__main__":
    main()
