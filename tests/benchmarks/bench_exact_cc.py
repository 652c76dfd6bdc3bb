"""Per-task peak memory of exact dedup's stages after the keys (reports/benchmarks/cc.md, "Exact and URL dedup").

    PYTHONPATH=<tree> python tests/benchmarks/bench_exact_cc.py RECIPE RUN_DIR [--json FILE]
    PYTHONPATH=<tree> python tests/benchmarks/bench_exact_cc.py --build N --parts P DIR [--json FILE]

RUN_DIR: a finished `curate run RECIPE` of the same tree (copy it first: the tasks rewrite their files,
the same bytes). Every task of the exact phase from `exact_part` on is run again, in plan order, each in
its own Python process, twice: once for the process's peak resident memory (VmHWM of /proc/self/status,
and the same after the imports, before the task: the baseline), once under tracemalloc for the peak of
the Python and NumPy allocations the task call makes (the data it holds, without the interpreter).
`--build N`: no run; DIR gets N processed records (shards of 10,000) drawn as `dup_corpus.py` draws them
(25% exact copies, 15% re-crawls, 5% copies of a re-crawl's text, 5% without a URL), the keys tasks run
once, then every later task of P partitions is measured as above (nodes planned here, as the phase would).
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


def build(out: Path, n: int, per: int = 10_000, seed: int = 7) -> list[tuple[str, str]]:
    """Processed shards of n records with dup_corpus.py's draws (texts and URLs as hashes only)."""
    import random

    import pyarrow as pa
    import pyarrow.parquet as pq

    from curation.core.hashing import content_hash
    from curation.core.layout import processed_path

    rng = random.Random(seed)
    earlier: list[tuple[str, str | None]] = []
    recrawls: list[str] = []
    shards = []
    for s in range(-(-n // per)):
        source, shard = f"s{s % 3}", f"{s // 3:05d}"
        rows = []
        for _ in range(min(per, n - s * per)):
            i = len(earlier)
            text, url = f"text {i}", f"https://site{rng.randrange(50)}.example/page/{i}"
            u = rng.random()
            if earlier and u < 0.25:
                text, url = rng.choice(earlier)[0], (url if rng.random() < 0.7 else None)
            elif earlier and u < 0.40:
                url = rng.choice(earlier)[1] or url
                text = f"updated {rng.randrange(10**6)} {text}"
                recrawls.append(text)
            elif recrawls and u < 0.45:
                text = rng.choice(recrawls)
            elif u < 0.50:
                url = None
            rows.append((f"{source}-{i}", text, url))
            earlier.append((text, url))
        path = processed_path(out, source, shard)
        path.parent.mkdir(parents=True, exist_ok=True)
        pq.write_table(pa.table({"id": [r[0] for r in rows], "text": ["x"] * len(rows),
                                 "meta": [json.dumps({"url": r[2]} if r[2] else {}) for r in rows],
                                 "content_hash": [content_hash(r[1]) for r in rows]},
                                schema=pa.schema([("id", pa.string()), ("text", pa.string()), ("meta", pa.string()),
                                                  ("content_hash", pa.binary(16))])), path)
        shards.append((source, shard))
    return sorted(shards)   # canonical order: source, then shard


def planned(out: Path, shards: list[tuple[str, str]], parts: int) -> list:
    """The nodes after the keys, as `ExactPhase.plan` builds them (the components' only where the tree has them);
    the keys tasks are run here, unmeasured."""
    from curation.core.node import Node
    from curation.corpus import exact

    for source, shard in shards:
        exact.run_keys(out, Node("exact_keys", source, shard, "fp", spec={"url": "url"}))
    ranges = [Node("exact_part", None, f"text-{p:04d}", f"fp{p}", spec={
        "modality": "text", "part": p, "partitions": parts, "scope": "global", "shards": shards}) for p in range(parts)]
    cc = getattr(exact, "plan_components", None)
    stages = cc("text", parts, ranges, [], shards) if cc else []
    final = Node("exact", None, "text", "fp", spec={"modality": "text", "partitions": parts, "shards": shards})
    return [*ranges, *(n for stage in stages for n in stage), final]


def main() -> None:
    from curation.plan.graph import load_plan

    ap = argparse.ArgumentParser()
    ap.add_argument("recipe", type=Path, nargs="?")
    ap.add_argument("run", type=Path)
    ap.add_argument("--build", type=int)
    ap.add_argument("--parts", type=int, default=8)
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()
    if args.build:
        nodes = planned(args.run, build(args.run, args.build), args.parts)
    else:
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
