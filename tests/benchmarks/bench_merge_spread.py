"""The merge of a split shard set: one task writing every part in turn, against a task per part on Ray workers
(`curation.runtime.fanout`, `curation.runtime.merge`), on a kept `bench_scale.py` output folder.

Each variant runs the source's merge task alone in a fresh process, with `shards.max_part_bytes` set on its
node (`--part-bytes`): `one` calls `run_merge` in the process (the local executor's way), `spread` starts an
embedded Ray of `--workers` CPUs, warms its workers, then runs the same task as the Ray executor does
(`ray_executor._on_node`), so the parts become tasks of their own; `hash` times the one piece that stays in one
process when they are (`shards.merging.unsplit_digests`: one sha256 over the set's bytes). They alternate `--rounds` times; every run
must give the same marker `shards` (part files, counts and sha256, `unsplit_sha256`). Afterwards the folder's
merged set is written back as its recipe had it.

    .venv/bin/python tests/benchmarks/bench_merge_spread.py --recipe /tmp/curate-scale/scale-corpus-1000000.yaml \\
        --out /tmp/curate-scale/out-1000000-ray --part-bytes 268435456 --rounds 3
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import os
import pickle
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]

CHILD = r"""
import json, pickle, sys, time
from pathlib import Path
variant, out, node_file, workers = sys.argv[1], Path(sys.argv[2]), sys.argv[3], int(sys.argv[4])
node = pickle.loads(Path(node_file).read_bytes())
from curation.runtime.merge import run_merge
if variant == "one":
    t = time.perf_counter()
    result = run_merge(out, node)
elif variant == "hash":   # what stays in one process when the parts are tasks: the set's unsplit sha256
    from curation.core.layout import part_prefix
    from curation.shards.merging import unsplit_digests
    inputs = [Path(f"{part_prefix(out, node.source, s)}") for s in node.spec["shards"]]
    t = time.perf_counter()
    unsplit_digests(inputs)
    result = {"shards": None}
else:
    import ray
    from curation.runtime.ray_executor import _loopback_env, _on_node
    _loopback_env()
    ray.init(num_cpus=workers, include_dashboard=False, _node_ip_address="127.0.0.1", log_to_driver=False)
    task = ray.remote(num_cpus=1, max_retries=0)(_on_node)
    warm = ray.remote(num_cpus=1)(lambda: __import__("curation.runtime.merge"))
    ray.get([warm.remote() for _ in range(workers)])   # workers started and the package imported
    t = time.perf_counter()
    result = ray.get(task.remote(run_merge, out, node))[1]
print(json.dumps({"seconds": time.perf_counter() - t, "shards": result["shards"],
                  "part_tasks": result.get("part_tasks", 0) if result["shards"] else 0}))
"""


def merge_node(recipe: Path, source: str):
    from curation.plan.graph import load_plan
    plan = load_plan(recipe)
    return next(n for n in plan.merge if n.source == source)


def measure(variant: str, out: Path, node, workers: int) -> dict:
    with tempfile.NamedTemporaryFile(suffix=".pkl", delete=False) as f:
        f.write(pickle.dumps(node))
    try:
        p = subprocess.run([sys.executable, "-c", CHILD, variant, str(out), f.name, str(workers)], cwd=REPO,
                           capture_output=True, text=True, timeout=3600)
    finally:
        os.unlink(f.name)
    if p.returncode:
        raise SystemExit(f"{variant} failed:\n{p.stderr[-3000:]}")
    return json.loads(p.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--recipe", type=Path, required=True)
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--source", default="web")
    ap.add_argument("--part-bytes", type=int, default=256 << 20)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--results", type=Path, default=REPO / "reports" / "benchmarks" / "merge_spread.json")
    a = ap.parse_args()
    original = merge_node(a.recipe, a.source)
    node = dataclasses.replace(original, spec={**original.spec, "max_part_bytes": a.part_bytes})
    runs, shards = [], None
    for r in range(a.rounds):
        for variant in ("one", "spread", "hash"):
            load = os.getloadavg()
            m = measure(variant, a.out, node, a.workers)
            if variant == "hash":
                runs.append({"variant": variant, "round": r, "seconds": round(m["seconds"], 2),
                             "load_1min": round(load[0], 2)})
                print(runs[-1], flush=True)
                continue
            if shards is None:
                shards = m["shards"]
            assert m["shards"] == shards, f"{variant} round {r}: the merged set differs"
            runs.append({"variant": variant, "round": r, "seconds": round(m["seconds"], 2),
                         "part_tasks": m["part_tasks"], "load_1min": round(load[0], 2)})
            print(runs[-1], flush=True)
    from curation.runtime.merge import run_merge
    run_merge(a.out, original)   # the folder's merged set as its recipe wrote it
    tokens = sum(s["total"] for s in shards.values())
    parts = sum(len(s.get("parts", [])) or 1 for s in shards.values())
    result = {"when": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "out": str(a.out), "source": a.source,
              "part_bytes": a.part_bytes, "parts": parts, "tokens": tokens, "workers": a.workers,
              "cpus": os.cpu_count(), "runs": runs}
    a.results.write_text(json.dumps(result, indent=1) + "\n")
    for variant in ("one", "spread", "hash"):
        s = sorted(x["seconds"] for x in runs if x["variant"] == variant)
        print(f"{variant}: {s} s")


if __name__ == "__main__":
    main()
