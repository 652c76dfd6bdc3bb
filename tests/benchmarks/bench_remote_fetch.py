"""Tasks of an output URL that each read a slice of many files: bytes they download from the store, each
task fetching its deps' files whole (before) or only what it reads (`CorpusPhase.partial_reads`, into a sparse
file), and whether their outputs match. Two phases:

- `band`: MinHash band tasks over the band-major signature files (header and table, then its segment);
- `exact_part`: exact dedup's hash-range tasks over each shard's sorted keys (the range index whole, then the
  `.npy` header and the rows from the stride where its range starts to the stride where it ends).

    python tests/benchmarks/bench_remote_fetch.py --documents 5000 --shards 6 --parts 1 8 63

Signature files of `--shards` shards of `--documents` documents, 14 bands (the recipe default), written by
`write_signatures` for each partition count; their keys are uniform 64-bit values, as MinHash band keys
are (a hash each), with 10% of the documents given another document's keys (planted duplicates, so the
band tasks find edges). Exact keys: `run_keys` of shards of `--documents` records with a content hash (10%
copies) and a URL each. The store is fsspec's in-memory filesystem behind `curation.core.outloc.Remote`,
and every task runs as a task of an output URL does (`curation.runtime.node.run_node` → fetch, run,
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
import time
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
    keys = rng.integers(0, 2**64 - 2, (n, BANDS), dtype=np.uint64, endpoint=True)   # below NO_SHINGLES
    copies = rng.random(n) < 0.1
    keys[copies] = keys[rng.integers(0, n, int(copies.sum()))]
    return keys


def _publish(fs, root: str, local: Path, key: str, marker: dict) -> int:
    """A dep task's outputs and marker into the store, as it would have published them; returns their bytes."""
    for rel in marker["outputs"]:
        fs.pipe_file(f"{root}/{rel}", (local / rel).read_bytes())
    fs.pipe_file(f"{root}/work/markers/{key}.json", json.dumps(marker).encode())
    return sum((local / rel).stat().st_size for rel in marker["outputs"])


def band_phase(parts: int, shards: int, documents: int, partial: bool, tmp: Path) -> dict:
    import fsspec
    fs = fsspec.filesystem("memory")
    root = f"bench-{parts}-{int(partial)}/run"
    rng = np.random.default_rng(parts)
    names, deps, file_bytes = [("s", f"{k:03d}") for k in range(shards)], [], 0
    for source, shard in names:
        path = sig_path(tmp / "sig", source, shard)
        write_signatures(path, keys_of(rng, documents), parts, "0123456789abcdef")
        file_bytes += _publish(fs, root, tmp / "sig", f"signatures/{source}/{shard}",
                               {"outputs": [str(path.relative_to(tmp / "sig"))]})
        deps.append(f"signatures/{source}/{shard}")
    edges = []

    def run(band: int, part: int) -> None:
        spec = {"band": band, "part": part, "partitions": parts, "scope": "global", "index": [],
                "shards": [list(s) for s in names]}
        node_module.run_node(f"memory://{root}", Node("band", None, f"{band:03d}-{part:03d}", "fp", deps=deps, spec=spec))
        rel = edges_path(Path("x"), band, part).relative_to("x")
        edges.append(np.load(io.BytesIO(fs.cat_file(f"{root}/{rel}"))).tobytes())
    return _counted(fs, partial, [lambda b=b, p=p: run(b, p) for b in range(BANDS) for p in range(parts)],
                    (".bands",), file_bytes, edges)


def exact_phase(parts: int, shards: int, documents: int, partial: bool, tmp: Path) -> dict:
    import fsspec
    import pyarrow as pa
    import pyarrow.parquet as pq

    from curation.core.hashing import content_hash
    from curation.core.layout import exact_part_path, processed_path
    from curation.corpus.exact import run_keys
    fs = fsspec.filesystem("memory")
    root = f"bench-exact-{parts}-{int(partial)}/run"
    rng = np.random.default_rng(parts)
    names, deps, file_bytes = [("s", f"{k:03d}") for k in range(shards)], [], 0
    for source, shard in names:
        texts = [f"{shard} {i}" if rng.random() > 0.1 else f"copy {rng.integers(documents)}" for i in range(documents)]
        path = processed_path(tmp, source, shard)
        path.parent.mkdir(parents=True, exist_ok=True)
        pq.write_table(pa.table({"id": [f"{shard}-{i}" for i in range(documents)],
                                 "content_hash": [content_hash(t) for t in texts],
                                 "meta": [json.dumps({"url": f"https://h{i % 97}.example/{shard}/{i}"})
                                          for i in range(documents)]}), path)
        marker = run_keys(tmp, Node("exact_keys", source, shard, "fp", spec={"url": "url"}))
        file_bytes += _publish(fs, root, tmp, f"exact_keys/{source}/{shard}", marker)
        deps.append(f"exact_keys/{source}/{shard}")
    outputs = []

    def run(part: int) -> None:
        spec = {"modality": "text", "part": part, "partitions": parts, "scope": "global", "shards": names}
        node_module.run_node(f"memory://{root}", Node("exact_part", None, f"text-{part:04d}", "fp", deps=deps, spec=spec))
        rel = exact_part_path(Path("x"), "text", part).relative_to("x")
        outputs.append(fs.cat_file(f"{root}/{rel}"))
    return _counted(fs, partial, [lambda p=p: run(p) for p in range(parts)], ("/keys/",), file_bytes, outputs)


def _counted(fs, partial: bool, tasks: list, which: tuple[str, ...], file_bytes: int, outputs: list) -> dict:
    """Run the tasks counting the bytes and requests of the files whose path holds one of `which`."""
    fetched = {"bytes": 0, "gets": 0}
    cat, get = type(fs).cat_file, type(fs).get_file

    def counting_cat(self, p, start=None, end=None, **kw):
        data = cat(self, p, start=start, end=end, **kw)
        if any(w in p for w in which):
            fetched["bytes"] += len(data)
            fetched["gets"] += 1
        return data

    def counting_get(self, p, *a, **kw):
        if any(w in p for w in which):
            fetched["bytes"] += fs.size(p)
            fetched["gets"] += 1
        return get(self, p, *a, **kw)
    type(fs).cat_file, type(fs).get_file = counting_cat, counting_get
    real = node_module.partial_reads
    if not partial:
        node_module.partial_reads = lambda node: None
    started = time.perf_counter()
    try:
        for task in tasks:
            task()
    finally:
        type(fs).cat_file, type(fs).get_file = cat, get
        node_module.partial_reads = real
    return {"tasks": len(tasks), "file_bytes": file_bytes, "downloaded": fetched["bytes"], "requests": fetched["gets"],
            "seconds": time.perf_counter() - started, "outputs": outputs}


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
        print("| phase | partitions | tasks | their files MB | fetch | downloaded MB | GET requests | outputs |")
        print("|---|---|---|---|---|---|---|---|")
        for name, phase in (("band", band_phase), ("exact_part", exact_phase)):
            for parts in args.parts:
                whole = phase(parts, args.shards, args.documents, False, Path(tmp) / f"{name}-w{parts}")
                ranged = phase(parts, args.shards, args.documents, True, Path(tmp) / f"{name}-r{parts}")
                same = whole.pop("outputs") == ranged.pop("outputs")
                for fetch, r in (("whole files", whole), ("what it reads", ranged)):
                    r.pop("seconds")   # no network here: bench_store_latency.py times the requests
                    print(f"| {name} | {parts} | {r['tasks']} | {r['file_bytes'] / 1e6:.2f} | {fetch} | "
                          f"{r['downloaded'] / 1e6:,.2f} | {r['requests']:,} | {'identical' if same else 'DIFFERENT'} |")
                    rows.append({"phase": name, "parts": parts, **r, "fetch": fetch, "outputs_identical": same})
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1) + "\n")


if __name__ == "__main__":
    main()
