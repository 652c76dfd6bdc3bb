"""Hamming-radius queries over a million 64-bit hashes: multi-index hashing vs numpy brute force.

The index (curation.core.hamming.HammingIndex) must return exactly brute force's answer; the
report gives the time per query for radii used by image decontamination and dedup (0 for exact
pHash equality, 4-8 for near copies, 10 for loose matching) and the agreement.

Usage: .venv/bin/python tests/benchmarks/bench_hamming.py → reports/benchmarks/hamming.md
"""
from __future__ import annotations

import os
import platform
import sys
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))


def main() -> None:
    from curation.core.hamming import HammingIndex, brute_force

    rng = np.random.default_rng(0)
    n, n_queries = 1_000_000, 300
    hashes = rng.integers(0, 2**63, n, dtype=np.uint64) | (rng.integers(0, 2, n, dtype=np.uint64) << np.uint64(63))
    queries = []
    for _ in range(n_queries):  # queries near stored hashes, as a re-encoded benchmark image would be
        h = int(hashes[rng.integers(n)])
        for b in rng.choice(64, size=int(rng.integers(0, 6)), replace=False):
            h ^= 1 << int(b)
        queries.append(h)
    t = time.perf_counter()
    index = HammingIndex(hashes, blocks=4)
    for radius in (0, 4, 8, 10):       # build the block tables each radius uses (lazily built otherwise)
        index._layout(radius)
    build = time.perf_counter() - t
    rows = []
    for radius in (0, 4, 8, 10):
        t = time.perf_counter()
        ours = [index.query(q, radius) for q in queries]
        t_ours = (time.perf_counter() - t) / n_queries
        t = time.perf_counter()
        brute = [brute_force(hashes, q, radius) for q in queries]
        t_brute = (time.perf_counter() - t) / n_queries
        same = sum(a.tolist() == b.tolist() for a, b in zip(ours, brute))
        rows.append(f"| {radius} | {1e3 * t_ours:.3f} | {1e3 * t_brute:.2f} | {t_brute / t_ours:.1f}× | "
                    f"{same} / {n_queries} | {sum(len(a) for a in ours) / n_queries:.2f} |")
    # batched: all queries at once, the way decontamination and dedup ask
    many = np.array(queries * 10, dtype=np.uint64)  # 3,000 queries
    batch_rows = []
    for radius in (0, 4, 8):
        t = time.perf_counter()
        qi, hi = index.query_many(many, radius)
        t_ours = time.perf_counter() - t
        t = time.perf_counter()
        bq, bh = [], []
        for i, q in enumerate(many.tolist()):
            hit = brute_force(hashes, q, radius)
            bq.append(np.full(hit.size, i))
            bh.append(hit)
        t_brute = time.perf_counter() - t
        same = qi.tolist() == np.concatenate(bq).tolist() and hi.tolist() == np.concatenate(bh).tolist()
        batch_rows.append(f"| {radius} | {many.size:,} | {t_ours:.3f} | {t_brute:.2f} | {t_brute / t_ours:.0f}× | "
                          f"{'yes' if same else 'NO'} |")
    lines = [
        "# Hamming-radius search: multi-index hashing vs brute force", "",
        f"Produced by `.venv/bin/python tests/benchmarks/bench_hamming.py` on {time.strftime('%Y-%m-%d')}, "
        f"{platform.machine()}, {os.cpu_count()} CPUs, Python {platform.python_version()}.", "",
        f"{n:,} random 64-bit hashes (the size of a large benchmark image set), {n_queries} queries within 0-5 "
        f"bits of stored hashes. Index build (the tables of all four radii): {build:.2f} s.", "",
        "One query at a time (`query`):", "",
        "| radius | index ms/query | brute force ms/query | speed-up | identical answers | matches/query |",
        "|---|---|---|---|---|---|", *rows, "",
        "A batch of queries at once (`query_many`, all probes of a chunk in one numpy call):", "",
        "| radius | queries | index s | brute force s | speed-up | identical pairs |", "|---|---|---|---|---|---|",
        *batch_rows, "",
        "Brute force is one vectorised XOR + popcount over all hashes per query (already fast: 8 MB scanned at "
        "memory speed). For r ≤ 5 the index cuts the 64 bits into r + 1 blocks (one exact lookup per block: "
        "a hash within r equals the query on at least one block); for larger r it probes 16-bit blocks within "
        "floor(r/4) bits (17 probes per block at r < 8, 137 at r < 12). Candidates are verified with a popcount "
        "on a block-sorted copy of the hashes (contiguous reads), so answers are exactly brute force's. The gain "
        "is largest at the radii the image rules use (0: exact pHash equality; up to 4: near copies) and "
        "vanishes at r ≥ 8, where brute force is the better plan.", "",
    ]
    (REPO / "reports" / "benchmarks" / "hamming.md").write_text("\n".join(lines))
    print("\n".join(lines))


if __name__ == "__main__":
    sys.exit(main())
