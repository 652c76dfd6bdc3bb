"""A Merkle root over a stage's files and ledger tables, carried in its manifest.

Leaves are `name:sha256` strings, sorted; interior nodes hash the concatenation of their two
children (an odd node is paired with itself). Ledger tables are hashed by content, canonical
JSON rows without the volatile columns (`curation.ledger.schema.VOLATILE_COLUMNS`: step timings, the
run's start and end, host, library versions), so the root is the same for any worker count and for
any re-run of the same recipe on the same inputs.
One root lets an auditor confirm a whole stage (shards, sampling plans, ledger) at once.
"""
from __future__ import annotations

import hashlib
import json
from pathlib import Path

from curation.ledger.schema import VOLATILE_COLUMNS


def merkle_root(leaves: list[str]) -> str:
    level = [hashlib.sha256(leaf.encode()).digest() for leaf in sorted(leaves)]
    if not level:
        return hashlib.sha256(b"").hexdigest()
    while len(level) > 1:
        if len(level) % 2:
            level.append(level[-1])
        level = [hashlib.sha256(level[i] + level[i + 1]).digest() for i in range(0, len(level), 2)]
    return level[0].hex()


def table_digest(path: Path) -> str:
    import pyarrow.parquet as pq

    rows = [{k: v for k, v in r.items() if k not in VOLATILE_COLUMNS} for r in pq.read_table(path).to_pylist()]
    blob = json.dumps(rows, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)
    return hashlib.sha256(blob.encode()).hexdigest()


def ledger_digests(ledger_dir: Path, exclude: tuple[str, ...] = ()) -> dict[str, str]:
    return {p.stem: table_digest(p) for p in sorted(ledger_dir.glob("*.parquet")) if p.stem not in exclude}


def manifest_leaves(manifest: dict) -> list[str]:
    leaves = [f"{f['path']}:{f['sha256']}" for s in manifest["sources"] for f in s["files"]]
    leaves += [f"{s['plan']['path']}:{s['plan']['sha256']}" for s in manifest["sources"] if "plan" in s]
    if manifest.get("long_context"):
        pack = manifest["long_context"]["packing"]
        leaves.append(f"{pack['path']}:{pack['sha256']}")
    leaves += [f"ledger/{t}:{d}" for t, d in manifest["ledger_tables"].items()]
    return leaves
