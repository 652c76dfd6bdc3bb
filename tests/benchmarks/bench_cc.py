"""Peak memory of the MinHash clustering tasks, one task per process, for reports/benchmarks/cc.md.

    python tests/benchmarks/bench_cc.py --sizes 100000 300000 --parts 1 8 [--reference /path/to/main]

Builds a corpus folder directly (no text, no signatures computed): N documents in shards of 10,000 over two
sources (processed shards with ids and a score, signature files of the right length), and band edge files of
planted near-duplicate clusters (N/20 clusters of 2-5 documents anywhere in the corpus; in each of the 14
bands a member lands in its cluster's bucket with probability 0.8, and the bucket gives the edges
(first, other) as `bucket_edges` does). Then runs every clustering task of the plan (`MinHashPhase.plan_clusters`)
in its own Python process and records each one's peak RSS (`wait4`), and, with `--reference` (a checkout of
main before this change), that checkout's single `clusters` task on the same files, comparing the duplicates,
clusters and drop lists row for row. `baseline` is the peak RSS of a process that only imports the modules.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pyarrow as pa

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, os.environ.get("CC_BENCH_CODE", str(REPO)))   # a task child runs the code it is given

BANDS, SHARD = 14, 10_000


def build(out: Path, n: int, parts: int, seed: int = 0) -> tuple[list, int]:
    from curation.core.atomic import atomic_write_parquet, save_array
    from curation.core.layout import edges_path, processed_path, work_dir
    rng = np.random.default_rng(seed)
    shards = []
    for k, at in enumerate(range(0, n, SHARD)):
        size = min(SHARD, n - at)
        source, shard = ("web_a" if k % 2 == 0 else "web_b"), f"{k // 2:05d}"
        shards.append((source, shard))
        atomic_write_parquet(processed_path(out, source, shard), pa.table(
            {"id": [f"{source}-{shard}-{i}" for i in range(size)],
             "meta": [json.dumps({"q": float(q)}) for q in rng.random(size)]}))
        # only the document count is read: a row-major file, which main's code and this code both read
        save_array(work_dir(out, "minhash") / "sig" / source / f"{shard}.npy", np.zeros((size, BANDS), np.uint64))
    # canonical order is source order then shard: web_a's shards first
    shards.sort(key=lambda s: (s[0], s[1]))
    c = n // 20
    size = rng.integers(2, 6, c)
    members = rng.permutation(n)[:c * 5].reshape(c, 5)
    valid = np.arange(5)[None, :] < size[:, None]
    total = 0
    for b in range(BANDS):
        present = valid & (rng.random((c, 5)) < 0.8)
        big = np.where(present, members, np.iinfo(np.int64).max)
        first = big.min(axis=1)
        part = rng.integers(0, parts, c)
        other = present & (members != first[:, None])
        rows = np.nonzero(other)
        edges = np.stack([first[rows[0]], members[rows]], axis=1).astype(np.int64)
        for p in range(parts):
            mine = edges[part[rows[0]] == p]
            save_array(edges_path(out, b, p), mine[np.lexsort((mine[:, 1], mine[:, 0]))])
            total += mine.shape[0]
    return shards, total


def run_task(out: Path, node_json: str) -> None:
    """In a child process: run one node's task function and print its marker."""
    from curation.core.node import Node
    from curation.corpus.minhash import MinHashPhase
    node = Node(**json.loads(node_json))
    runners = MinHashPhase().runners()
    marker = runners[node.phase](out, node)
    print(json.dumps({k: v for k, v in marker.items() if k != "outputs"} | {"_peak": _hwm()}))


def _hwm() -> int:
    """This process's peak RSS in bytes (VmHWM: since its exec, unlike a forked child's ru_maxrss, which
    starts at the parent's size)."""
    line = next(x for x in Path("/proc/self/status").read_text().splitlines() if x.startswith("VmHWM:"))
    return int(line.split()[1]) * 1024


def child(out: Path, node: dict, code: Path) -> tuple[int, float, str]:
    """(peak RSS bytes, seconds, marker JSON) of one task in a fresh process running the code at `code`."""
    env = dict(os.environ, PYTHONPATH=str(code), CC_BENCH_CODE=str(code))
    cmd = [sys.executable, str(Path(__file__).resolve()), "--task", str(out), json.dumps(node)]
    start = time.perf_counter()
    p = subprocess.Popen(cmd, cwd=code, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    stdout, stderr = p.communicate()
    if p.returncode:
        raise RuntimeError(f"task {node['phase']} failed:\n{stderr[-3000:]}")
    marker = json.loads(stdout.strip().splitlines()[-1])
    return marker.pop("_peak"), time.perf_counter() - start, json.dumps(marker)


def written(out: Path, shards) -> tuple:
    import pyarrow.parquet as pq

    from curation.core.layout import drops_path, work_dir
    base = work_dir(out, "minhash")
    return (pq.read_table(base / "duplicates.parquet").to_pylist(), pq.read_table(base / "clusters.parquet").to_pylist(),
            [pq.read_table(drops_path(out, "minhash", *s)).to_pylist() for s in shards])


def bench(n: int, parts: int, reference: Path | None, keep: str) -> dict:
    from curation.core.node import Node
    from curation.corpus.minhash import MinHashPhase
    from curation.recipe.schema import MinHashDedup
    work = Path(tempfile.mkdtemp(prefix=f"cc-bench-{n}-"))
    try:
        out = work / "new"
        shards, band_edges = build(out, n, parts)
        cfg = MinHashDedup(partitions=parts, keep=keep, score_field="q" if keep == "highest_quality" else None)
        spec = {"cfg": cfg.model_dump(mode="json"), "bands": BANDS, "rows": 8, "index": [], "partitions": parts,
                "scope": "global", "shards": shards}
        tasks = []
        for stage in MinHashPhase.plan_clusters(cfg, spec, [], [], []):
            for node in stage:
                rss, secs, marker = child(out, {"phase": node.phase, "source": node.source, "shard": node.shard,
                                                "fingerprint": node.fingerprint, "spec": node.spec}, REPO)
                tasks.append({"task": node.key, "peak_rss_mb": round(rss / 2**20, 1), "seconds": round(secs, 2),
                              "marker": json.loads(marker)})
        row = {"documents": n, "partitions": parts, "keep": keep, "band_edges": band_edges, "tasks": tasks}
        if reference is not None:
            old = work / "old"
            shutil.copytree(out / "processed", old / "processed")
            shutil.copytree(out / "work" / "minhash" / "sig", old / "work" / "minhash" / "sig")
            shutil.copytree(out / "work" / "minhash" / "edges", old / "work" / "minhash" / "edges")
            node = Node("clusters", None, None, "-", spec=spec)
            rss, secs, marker = child(old, {"phase": "clusters", "source": None, "shard": None, "fingerprint": "-",
                                            "spec": node.spec}, reference)
            row["reference"] = {"task": "clusters (one task, main)", "peak_rss_mb": round(rss / 2**20, 1),
                                "seconds": round(secs, 2), "marker": json.loads(marker)}
            row["identical"] = written(old, shards) == written(out, shards)
        return row
    finally:
        shutil.rmtree(work, ignore_errors=True)


def baseline() -> float:
    """Peak RSS (MB) of a process that imports what a clustering task imports and does nothing."""
    code = ("import curation.corpus.minhash, pyarrow.parquet, numpy; from pathlib import Path; "
            "print([x for x in Path('/proc/self/status').read_text().splitlines() if x.startswith('VmHWM:')][0])")
    line = subprocess.run([sys.executable, "-c", code], cwd=REPO, env=dict(os.environ, PYTHONPATH=str(REPO)),
                          capture_output=True, text=True, check=True).stdout
    return round(int(line.split()[1]) / 1024, 1)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", type=int, nargs="+", default=[100_000, 300_000])
    ap.add_argument("--parts", type=int, nargs="+", default=[1, 8])
    ap.add_argument("--keep", default="highest_quality", choices=["earliest", "highest_quality"])
    ap.add_argument("--reference", type=Path, help="a checkout of main's code before partitioned clustering")
    ap.add_argument("--json", type=Path)
    ap.add_argument("--task", nargs=2, metavar=("OUT", "NODE"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.task:
        return run_task(Path(args.task[0]), args.task[1])
    rows = [bench(n, p, args.reference, args.keep) for n in args.sizes for p in args.parts]
    result = {"baseline_rss_mb": baseline(), "runs": rows}
    print(f"baseline (imports only): {result['baseline_rss_mb']} MB")
    print("| documents | partitions | band edges | largest scatter/round | settle | largest resolve | clusters "
          "| one task (main) | identical |")
    print("|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        def peak(prefix: str, r=r) -> float:
            return max((t["peak_rss_mb"] for t in r["tasks"] if t["task"].startswith(prefix)), default=0)
        ref = r.get("reference", {}).get("peak_rss_mb", "")
        print(f"| {r['documents']:,} | {r['partitions']} | {r['band_edges']:,} | "
              f"{max(peak('cc_scatter'), peak('cc_round'))} MB | {peak('cc_settle')} MB | {peak('cc_resolve')} MB | "
              f"{peak('clusters')} MB | {ref} MB | {r.get('identical', '')} |")
    if args.json:
        args.json.write_text(json.dumps(result, indent=1) + "\n")


if __name__ == "__main__":
    main()
