"""The MinHash band phase on an output URL: bytes the band tasks download from the store, each task
fetching its deps' signature files whole (before) or only the byte ranges it reads (`partial_reads`:
header, two table entries and its segment of each file, into a sparse file), and whether the edges match.

    python tests/benchmarks/bench_band_remote.py --documents 5000 --shards 6 --parts 1 8 63

Signature files of `--shards` shards of `--documents` documents, 14 bands (the recipe default), written by
`write_signatures` for each partition count; their keys are uniform 64-bit values, as MinHash band keys
are (a hash each), with 10% of the documents given another document's keys (planted duplicates, so the
band tasks find edges). The store is fsspec's in-memory filesystem behind `curation.core.outloc.Remote`,
and every band task runs as a task of an output URL does (`curation.runtime.node.run_node` → fetch, run,
publish); the bytes are counted at the filesystem (`cat_file` ranges and `get_file` sizes), so they are
what an object store would be asked for, GET by GET. Byte counts are exact; this measures no network.
"""
from __future__ import annotations

import argparse
import io
import json
import os
import sys
import tempfile
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from curation.core.layout import edges_path, sig_path  # noqa: E402
from curation.core.node import Node  # noqa: E402
from curation.corpus.minhash_sig import write_signatures  # noqa: E402
from curation.runtime import node as node_module  # noqa: E402

BANDS = 14


def keys_of(rng, n: int) -> np.ndarray:
    keys = rng.integers(0, 2**63, (n, BANDS), dtype=np.int64).astype(np.uint64) * np.uint64(2)
    copies = rng.random(n) < 0.1
    keys[copies] = keys[rng.integers(0, n, int(copies.sum()))]
    return keys


def phase(parts: int, shards: int, documents: int, partial: bool, tmp: Path) -> dict:
    import fsspec
    fs = fsspec.filesystem("memory")
    root = f"bench-{parts}-{int(partial)}/run"
    rng = np.random.default_rng(parts)
    names, deps, file_bytes = [("s", f"{k:03d}") for k in range(shards)], [], 0
    for source, shard in names:
        path = sig_path(tmp / "sig", source, shard)
        write_signatures(path, keys_of(rng, documents), parts, "0123456789abcdef")
        rel = str(path.relative_to(tmp / "sig"))
        fs.pipe_file(f"{root}/{rel}", path.read_bytes())
        file_bytes += path.stat().st_size
        deps.append(f"signatures/{source}/{shard}")
        fs.pipe_file(f"{root}/work/markers/{deps[-1]}.json", json.dumps({"outputs": [rel]}).encode())
    fetched = {"ranged": 0, "gets": 0, "whole": 0}
    cat, get = type(fs).cat_file, type(fs).get_file

    def counting_cat(self, p, start=None, end=None, **kw):
        data = cat(self, p, start=start, end=end, **kw)
        if p.endswith(".bands"):
            fetched["ranged"] += len(data)
            fetched["gets"] += 1
        return data

    def counting_get(self, p, *a, **kw):
        if p.endswith(".bands"):
            fetched["whole"] += fs.size(p)
            fetched["gets"] += 1
        return get(self, p, *a, **kw)
    type(fs).cat_file, type(fs).get_file = counting_cat, counting_get
    real = node_module.partial_reads
    if not partial:
        node_module.partial_reads = lambda node: None
    edges = []
    try:
        for band in range(BANDS):
            for part in range(parts):
                spec = {"band": band, "part": part, "partitions": parts, "scope": "global", "index": [],
                        "shards": [list(s) for s in names]}
                node_module.run_node(f"memory://{root}", Node("band", None, f"{band:03d}-{part:03d}", "fp",
                                                              deps=deps, spec=spec))
                rel = edges_path(Path("x"), band, part).relative_to("x")
                edges.append(np.load(io.BytesIO(fs.cat_file(f"{root}/{rel}"))).tobytes())
    finally:
        type(fs).cat_file, type(fs).get_file = cat, get
        node_module.partial_reads = real
    return {"parts": parts, "tasks": BANDS * parts, "signature_bytes": file_bytes,
            "downloaded": fetched["ranged"] + fetched["whole"], "requests": fetched["gets"], "edges": edges}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--documents", type=int, default=5000)
    ap.add_argument("--shards", type=int, default=6)
    ap.add_argument("--parts", type=int, nargs="+", default=[1, 8, 63])
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        os.environ["CURATE_STAGING"] = f"{tmp}/staging"
        print("| partitions | band tasks | signature files MB | fetch | downloaded MB | GET requests | edges |")
        print("|---|---|---|---|---|---|---|")
        for parts in args.parts:
            whole = phase(parts, args.shards, args.documents, False, Path(tmp) / f"w{parts}")
            ranged = phase(parts, args.shards, args.documents, True, Path(tmp) / f"r{parts}")
            same = whole.pop("edges") == ranged.pop("edges")
            for name, r in (("whole files", whole), ("byte ranges", ranged)):
                print(f"| {parts} | {r['tasks']} | {r['signature_bytes'] / 1e6:.2f} | {name} | "
                      f"{r['downloaded'] / 1e6:,.2f} | {r['requests']:,} | {'identical' if same else 'DIFFERENT'} |")
                rows.append({**r, "fetch": name, "edges_identical": same})
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1) + "\n")


if __name__ == "__main__":
    main()
