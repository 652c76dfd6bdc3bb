"""Tasks of an output URL against a store that answers each request after a round trip: a task's requests
one at a time (before: `TRANSFERS = 1`, how `curation.runtime.publish` fetched and uploaded until then)
against `TRANSFERS` (16) in flight, on the two phases whose tasks read a piece of every shard.

    python tests/benchmarks/bench_store_latency.py --latency-ms 20 --documents 2000 --shards 32 --parts 8

The store is fsspec's in-memory filesystem with every request (`cat_file`, `get_file`, `put_file`,
`pipe_file`, `exists`, `info`, `rm_file`) delayed by `--latency-ms` (a sleep, which lets other requests of
the task proceed, as waiting on a socket does). S3 answers a small GET in about 10-30 ms from the same
region; that number is an assumption here, not a measurement. The phases and tasks are those of
bench_remote_fetch.py (only what each task reads is fetched); the outputs of both arms are compared.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "tests" / "benchmarks"))

from bench_remote_fetch import band_phase, exact_phase  # noqa: E402

from curation.runtime import publish  # noqa: E402

REQUESTS = ("cat_file", "get_file", "put_file", "pipe_file", "exists", "info", "rm_file")


def delayed(latency: float):
    """Patch the in-memory filesystem so that every request waits `latency` seconds first; returns an undo."""
    from fsspec.implementations.memory import MemoryFileSystem
    saved = {name: getattr(MemoryFileSystem, name) for name in REQUESTS}

    def wrap(fn):
        def slow(self, *a, **kw):
            time.sleep(latency)
            return fn(self, *a, **kw)
        return slow
    for name, fn in saved.items():
        setattr(MemoryFileSystem, name, wrap(fn))
    return lambda: [setattr(MemoryFileSystem, name, fn) for name, fn in saved.items()]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--latency-ms", type=float, default=20)
    ap.add_argument("--documents", type=int, default=2000)
    ap.add_argument("--shards", type=int, default=32)
    ap.add_argument("--parts", type=int, default=8)
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()
    rows = []
    print(f"latency {args.latency_ms:g} ms per request, {args.shards} shards of {args.documents} documents, "
          f"{args.parts} partitions")
    print("| phase | tasks | requests in flight | seconds | per task | outputs |")
    print("|---|---|---|---|---|---|")
    with tempfile.TemporaryDirectory() as tmp:
        os.environ["CURATE_STAGING"] = f"{tmp}/staging"
        for name, phase in (("band", band_phase), ("exact_part", exact_phase)):
            arms = {}
            for transfers in (1, publish.TRANSFERS):
                saved, publish.TRANSFERS = publish.TRANSFERS, transfers
                undo = delayed(args.latency_ms / 1000)
                try:
                    arms[transfers] = phase(args.parts, args.shards, args.documents, True,
                                            Path(tmp) / f"{name}-{transfers}")
                finally:
                    undo()
                    publish.TRANSFERS = saved
            first, *rest = arms.values()
            same = all(r["outputs"] == first["outputs"] for r in rest)
            for transfers, r in arms.items():
                print(f"| {name} | {r['tasks']} | {transfers} | {r['seconds']:.1f} | {r['seconds'] / r['tasks']:.3f} | "
                      f"{'identical' if same else 'DIFFERENT'} |")
                rows.append({"phase": name, "transfers": transfers, "tasks": r["tasks"], "seconds": r["seconds"],
                             "latency_ms": args.latency_ms, "shards": args.shards, "documents": args.documents,
                             "partitions": args.parts, "outputs_identical": same})
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1) + "\n")


if __name__ == "__main__":
    main()
