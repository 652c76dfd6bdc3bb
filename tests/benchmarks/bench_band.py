"""The MinHash band phase: bytes read and seconds with row-major signature files (one documents × bands
array per shard, every band task reads every shard's whole file for one strided column) against band-major
ones (each band task preads its (band, partition) slice of each shard: `curation.corpus.minhash_sig`).

    python tests/benchmarks/bench_band.py --documents 30000 --parts 1 8 32 --reference /work/main \\
        --json reports/benchmarks/band_major.json

The corpus is `scale_corpus.py`'s (real sentences of ../shared/data/web_text, 10% planted copies, 5,000
documents a shard); its process and signatures tasks run once with this code (plan of a MinHash-only recipe).
The row-major files are the keys as the previous version wrote them (`np.save` of documents × bands uint64);
the band-major files are what this code's signatures task writes for each partition count (re-laid out from
the same keys). Each band phase runs in a fresh process, its band tasks one after the other in plan order:
row-major with `--reference`'s code (main's `run_band`, memory-mapped columns), band-major with this code.

Counters, per task, from /proc/self/io: `read_bytes` (bytes the task caused to be fetched from the block
device: every signature file is evicted from the page cache (fsync, then POSIX_FADV_DONTNEED) before each
task, so this is what a task reads from cold storage, memory-map faults and readahead included) and `rchar`
(bytes returned by read syscalls: counts pread, not memory-map faults). Band-major is read with
POSIX_FADV_RANDOM (no readahead: what `read_band` does) and, for comparison, with the kernel's readahead.
`seconds`: the task's wall time, cold
(evicted before it) and warm (a second pass over cached files). Edges: every band file of the band-major run
is compared byte for byte with the row-major run's.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(Path(__file__).resolve().parent))
import scale_corpus  # noqa: E402 (the benchmark's corpus, beside this file)

VOCAB = REPO / "tokenizers" / "curate-demo-v1.yaml"

PROBE = r"""
import json, os, sys, time
from pathlib import Path
sys.path.insert(0, sys.argv[1])
from curation.core.node import Node
from curation.corpus.minhash import run_band
out, specs = Path(sys.argv[2]), json.loads(Path(sys.argv[3]).read_text())
if sys.argv[4] == "readahead":
    import curation.corpus.minhash_sig as sig
    sig.NO_READAHEAD = False
files = sorted(p for p in (out / "work" / "minhash" / "sig").rglob("*") if p.is_file())

def evict():
    for p in files:
        fd = os.open(p, os.O_RDONLY)
        os.fsync(fd)
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        os.close(fd)

def io():
    d = dict(line.split(": ") for line in Path("/proc/self/io").read_text().split("\n") if line)
    return int(d["read_bytes"]), int(d["rchar"])

rows = []
for cold in (True, False):
    if not cold:
        for p in files:
            p.read_bytes()
    for spec in specs:
        node = Node("band", None, f"{spec['band']:03d}-{spec['part']:03d}", "-", spec=spec)
        if cold:
            evict()
        (rb, rc), t = io(), time.perf_counter()
        marker = run_band(out, node)
        secs = time.perf_counter() - t
        rb2, rc2 = io()
        rows.append({"cold": cold, "band": spec["band"], "part": spec["part"], "read_bytes": rb2 - rb,
                     "rchar": rc2 - rc, "seconds": secs, "keys": marker["keys"], "edges": marker["edges"]})
print(json.dumps(rows))
"""


def recipe(folder: Path, corpus: Path, parts: int) -> Path:
    path = folder / "band.yaml"
    path.write_text(f"name: band\nvocabulary: {VOCAB}\ndedup: {{exact: null, minhash: {{partitions: {parts}}}}}\n"
                    f"sources:\n  - name: web\n    license: MIT\n"
                    f"    input: {{paths: ['{corpus}/*.jsonl.gz'], id_field: id, metadata_fields: [url]}}\n"
                    f"    normalize: {{nfc: false, ftfy: false}}\n")
    return path


def signatures(work: Path, n: int) -> tuple[Path, list]:
    """Process and signatures tasks of the corpus (once): the folder, and the plan's band specs' base."""
    from curation.plan.graph import load_plan
    from curation.runtime.node import current, run_node

    corpus = work / f"corpus-{n}"
    scale_corpus.build(corpus, n)
    out = work / f"sig-{n}"
    plan = load_plan(recipe(work, corpus, 1))
    t = time.perf_counter()
    for node in plan.nodes():
        if node.phase in ("process", "signatures") and current(out, node) is None:
            run_node(str(out), node)
    print(f"process + signatures of {n} documents: {time.perf_counter() - t:.1f} s", file=sys.stderr)
    band = next(node for node in plan.nodes() if node.phase == "band")
    return out, band.spec


def layouts(src: Path, dst: Path, parts: int | None) -> None:
    """`dst` with the signature files of `src` row-major (parts None) or band-major for `parts`."""
    import numpy as np

    from curation.core.atomic import save_array
    from curation.core.layout import sig_path, sig_rows_path
    from curation.corpus.minhash_sig import header, read_keys, write_signatures
    for path in sorted((src / "work" / "minhash" / "sig").glob("*/*.bands")):
        source, shard = path.parent.name, path.stem
        keys = read_keys(path)
        if parts is None:
            save_array(sig_rows_path(dst, source, shard), np.ascontiguousarray(keys))
        else:
            write_signatures(sig_path(dst, source, shard), keys, parts, header(path)[0])
    os.sync()


def band_phase(code: Path, out: Path, specs: list[dict], readahead: bool) -> list[dict]:
    spec_file = out / "specs.json"
    spec_file.write_text(json.dumps(specs))
    res = subprocess.run([sys.executable, "-c", PROBE, str(code), str(out), str(spec_file),
                          "readahead" if readahead else "-"],
                         capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(code)})
    if res.returncode:
        raise SystemExit(f"band phase failed in {out}:\n{res.stderr[-3000:]}")
    return json.loads(res.stdout.strip().splitlines()[-1])


def summary(rows: list[dict], cold: bool) -> dict:
    mine = [r for r in rows if r["cold"] == cold]
    return {"tasks": len(mine), "read_bytes": sum(r["read_bytes"] for r in mine), "rchar": sum(r["rchar"] for r in mine),
            "seconds": round(sum(r["seconds"] for r in mine), 3), "keys": sum(r["keys"] for r in mine),
            "edges": sum(r["edges"] for r in mine)}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--documents", type=int, default=30000)
    ap.add_argument("--parts", type=int, nargs="+", default=[1, 8, 32])
    ap.add_argument("--reference", default=None, help="checkout whose run_band reads the row-major files (default: "
                                                       "this code's reader of row-major files)")
    ap.add_argument("--work", default="/tmp/curate-band-bench")
    ap.add_argument("--json", default=None)
    args = ap.parse_args()
    import shutil

    from curation.core.layout import edges_path
    work = Path(args.work)
    work.mkdir(parents=True, exist_ok=True)
    src, base = signatures(work, args.documents)
    sig_bytes = {}
    results = []
    for parts in args.parts:
        specs = [{**base, "band": b, "part": p, "partitions": parts} for b in range(base["bands"]) for p in range(parts)]
        row = {"documents": args.documents, "shards": len(base["shards"]), "bands": base["bands"], "partitions": parts}
        runs = {}
        for name, layout, code in (("row-major", None, Path(args.reference or REPO)), ("band-major", parts, REPO),
                                   ("band-major, readahead", parts, REPO)):
            out = work / f"{name.split(',')[0]}-{parts}"
            if name != "band-major, readahead":
                shutil.rmtree(out, ignore_errors=True)
                layouts(src, out, layout)
            sig_bytes[name] = sum(p.stat().st_size for p in (out / "work" / "minhash" / "sig").rglob("*") if p.is_file())
            runs[name] = band_phase(code, out, specs, name.endswith("readahead"))
            row[name] = {"cold": summary(runs[name], True), "warm": summary(runs[name], False),
                         "signature_bytes": sig_bytes[name]}
        row["edges_identical"] = all(
            edges_path(work / f"row-major-{parts}", s["band"], s["part"]).read_bytes()
            == edges_path(work / f"band-major-{parts}", s["band"], s["part"]).read_bytes() for s in specs)
        results.append(row)
        print(json.dumps(row), flush=True)
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=1) + "\n")


if __name__ == "__main__":
    main()
