"""Tasks of an output URL against a store that answers each request after a round trip: a task's requests
one at a time (before: `TRANSFERS = 1`, how `curation.runtime.publish` fetched and uploaded until then)
against `TRANSFERS` (16) in flight, on the two phases whose tasks read a piece of every shard.

    python tests/benchmarks/bench_store_latency.py --latency-ms 20 --documents 2000 --shards 32 --parts 8

The store is fsspec's in-memory filesystem with every request (`cat_file`, `get_file`, `put_file`,
`pipe_file`, `exists`, `info`, `rm_file`) delayed by `--latency-ms` (a sleep, which lets other requests of
the task proceed, as waiting on a socket does). S3 answers a small GET in about 10-30 ms from the same
region; that number is an assumption here, not a measurement. The phases and tasks are those of
bench_remote_fetch.py (only what each task reads is fetched); the outputs of both arms are compared. Then the
driver's side (`curation.runtime.mirror`): `pull` of `--nodes` nodes' outputs (3 files each) into its mirror,
and `push` of `--driver-files` files it wrote (ledger, report, hand-off) and 3 manifests.
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

from curation.runtime import mirror, publish  # noqa: E402

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


def driver_side(tmp: Path, nodes: int, driver_files: int) -> dict:
    """Seconds of the driver's `pull` of `nodes` nodes' outputs and of its `push`; and whether the bytes match."""
    import fsspec

    from curation.core.outloc import Remote
    fs, root = fsspec.filesystem("memory"), f"driver-{tmp.name}/run"
    markers = {}
    for k in range(nodes):
        key, outputs = f"tokenize/s/{k:05d}", [f"tokenized/s/parts/{k:05d}{ext}" for ext in (".bin", ".idx", ".json")]
        for rel in outputs:
            fs.pipe_file(f"{root}/{rel}", f"{rel} {k}".encode() * 100)
        markers[key] = {"outputs": outputs}
        fs.pipe_file(f"{root}/work/markers/{key}.json", json.dumps(markers[key]).encode())
    here = tmp / "mirror"
    started = time.perf_counter()
    mirror.pull(Remote(f"memory://{root}"), here, markers)
    pulled = time.perf_counter() - started
    same = all((here / rel).read_bytes() == fs.cat_file(f"{root}/{rel}") for m in markers.values() for rel in m["outputs"])
    for k in range(driver_files):
        (here / "reports" / f"f{k}.txt").parent.mkdir(parents=True, exist_ok=True)
        (here / "reports" / f"f{k}.txt").write_text(f"report file {k}\n" * 50)
    for stage in ("a", "b", "c"):
        (here / "manifests").mkdir(exist_ok=True)
        (here / "manifests" / f"{stage}.json").write_text("{}")
    started = time.perf_counter()
    counts = mirror.push(Remote(f"memory://{root}"), here, markers)
    pushed = time.perf_counter() - started
    # a re-run's skip checks: node by node against the store (before), or from the state read at the start
    from curation.core.node import Node
    from curation.runtime.node import digest
    nodes = [Node("tokenize", "s", key.rsplit("/", 1)[1], "fp") for key in markers]
    for node in nodes:
        fs.pipe_file(f"{root}/{publish.marker_rel(node.key)}",
                     json.dumps({"fingerprint": "fp", **markers[node.key]}).encode())
    started = time.perf_counter()
    live = [publish.current_remote(f"memory://{root}", n, digest) for n in nodes]
    by_node = time.perf_counter() - started
    started = time.perf_counter()
    state = publish.StoreState(Remote(f"memory://{root}"), [n.key for n in nodes])
    read = [publish.current_remote(f"memory://{root}", n, digest, state) for n in nodes]
    at_start = time.perf_counter() - started
    return {"pull_s": pulled, "push_s": pushed, "skip_by_node_s": by_node, "skip_state_s": at_start,
            "same": same and counts["uploaded"] == driver_files and read == live and all(live)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--latency-ms", type=float, default=20)
    ap.add_argument("--documents", type=int, default=2000)
    ap.add_argument("--shards", type=int, default=32)
    ap.add_argument("--parts", type=int, default=8)
    ap.add_argument("--nodes", type=int, default=200)
    ap.add_argument("--driver-files", type=int, default=100)
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
        print(f"\n| driver | requests in flight | pull {args.nodes} nodes' outputs s | push {args.driver_files} files "
              f"and 3 manifests s | re-run: skip checks node by node s | from the state read at the start s | "
              f"bytes, answers |")
        print("|---|---|---|---|---|---|---|")
        for transfers in (1, publish.TRANSFERS):
            saved, publish.TRANSFERS = publish.TRANSFERS, transfers
            undo = delayed(args.latency_ms / 1000)
            try:
                r = driver_side(Path(tmp) / f"driver-{transfers}", args.nodes, args.driver_files)
            finally:
                undo()
                publish.TRANSFERS = saved
            print(f"| mirror | {transfers} | {r['pull_s']:.1f} | {r['push_s']:.1f} | {r['skip_by_node_s']:.1f} | "
                  f"{r['skip_state_s']:.1f} | {'identical' if r['same'] else 'DIFFERENT'} |")
            rows.append({"phase": "driver", "transfers": transfers, **r, "nodes": args.nodes,
                         "driver_files": args.driver_files, "latency_ms": args.latency_ms})
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1) + "\n")


if __name__ == "__main__":
    main()
