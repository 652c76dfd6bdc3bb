"""What the driver holds to plan and schedule a run, by input shards: the plan's nodes (specs, deps) and the
scheduler's graph, as the shard count grows. A partitioned phase's task reads every shard (a MinHash band
task, an exact dedup `exact_part` or `exact_resolve` task), so its deps list every shard, and the number of
such tasks grows with the partitions (exact dedup's default then: one per shard, up to 1,024): held naively the
dependency edges grow as shards × partitions, not as shards.

    python tests/benchmarks/bench_plan_memory.py --shards 1000 4000 [--base /tmp/base]

Each size runs in a fresh process: a recipe of one text source over `--shards` JSONL files of one short
document each (generated once under --work), exact dedup (default partitions) and MinHash with
`--minhash-partitions`. Measured: the process's RSS high-water mark (VmHWM) grown by building the plan
(`curation.plan.graph.load_plan`, input hashing included) and then by the scheduler walking the whole graph
(`runtime.execute.stage_deps` and `runtime.schedule.run_graph` with every task answered as already done, so
no task runs), its seconds, the nodes and the dependency edges. `--base DIR` runs the same with the code in
DIR (`git archive BASE | tar -x -C DIR`) first, for a before/after on the same files and machine.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]

PROBE = r"""
import json, resource, sys, time
from pathlib import Path

def hwm():
    for line in open("/proc/self/status"):
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024

recipe = Path(sys.argv[1])
from curation.plan.graph import load_plan
from curation.runtime.execute import stage_deps
from curation.runtime.schedule import Skip, run_graph
import curation.recipe.load, curation.corpus.minhash, curation.corpus.exact   # imports before the baseline

class Done:
    slots = 64
    def submit(self, *a): raise AssertionError("no task runs here")
    def wait(self): return []
    def cancel(self): pass

base, t0 = hwm(), time.perf_counter()
plan = load_plan(recipe)
planned, t1 = hwm(), time.perf_counter()
nodes = list(plan.nodes())
edges = sum(len(n.deps) for n in nodes)
deps = stage_deps(plan)
run_graph(Done(), [n.key for n in nodes], deps, lambda k: Skip({}), progress=False)
scheduled, t2 = hwm(), time.perf_counter()
print(json.dumps({"nodes": len(nodes), "edges": edges, "plan_mb": planned - base, "schedule_mb": scheduled - planned,
                  "plan_s": t1 - t0, "schedule_s": t2 - t1}))
"""


def corpus(work: Path, shards: int, minhash_partitions: int) -> Path:
    """A recipe over `shards` one-document JSONL files (made once)."""
    data = work / f"shards-{shards}"
    if not (data / ".done").is_file():
        data.mkdir(parents=True, exist_ok=True)
        for i in range(shards):
            (data / f"{i:06d}.jsonl").write_text(json.dumps({"id": f"d{i}", "text": f"document {i} of the benchmark, "
                                                             f"a few words long"}) + "\n")
        (data / ".done").write_text("")
    recipe = work / f"plan-{shards}-{minhash_partitions}.yaml"
    recipe.write_text(f"""name: plan-memory
vocabulary: {REPO / 'tokenizers' / 'curate-demo-v1.yaml'}
sources:
  - name: web
    input: {{paths: [{data}/*.jsonl], id_field: id}}
    license: MIT
dedup: {{exact: {{}}, minhash: {{partitions: {minhash_partitions}}}}}
""")
    return recipe


def measure(recipe: Path, code: Path) -> dict:
    env = {**os.environ, "PYTHONPATH": str(code)}
    p = subprocess.run([sys.executable, "-c", PROBE, str(recipe)], cwd=code, env=env, capture_output=True, text=True,
                       timeout=3600)
    if p.returncode:
        raise SystemExit(p.stderr[-3000:])
    return json.loads(p.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--shards", type=int, nargs="+", default=[1000, 4000])
    ap.add_argument("--minhash-partitions", type=int, default=63)
    ap.add_argument("--work", type=Path, default=Path("/tmp/curate-plan-memory"))
    ap.add_argument("--base", type=Path, help="a checkout of the code to compare against (run first)")
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()
    rows = []
    print("| code | shards | nodes | dependency edges | plan: driver MB | plan s | scheduler: driver MB | scheduler s |")
    print("|---|---|---|---|---|---|---|---|")
    for shards in args.shards:
        recipe = corpus(args.work, shards, args.minhash_partitions)
        for label, code in ([("base", args.base)] if args.base else []) + [("this", REPO)]:
            r = measure(recipe, code)
            print(f"| {label} | {shards:,} | {r['nodes']:,} | {r['edges']:,} | {r['plan_mb']:,.0f} | {r['plan_s']:.1f} | "
                  f"{r['schedule_mb']:,.0f} | {r['schedule_s']:.1f} |", flush=True)
            rows.append({"code": label, "shards": shards, "minhash_partitions": args.minhash_partitions, **r})
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1) + "\n")


if __name__ == "__main__":
    main()
