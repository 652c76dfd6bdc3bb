"""A Merkle root over a stage's files and ledger tables, carried in its manifest.

Leaves are `name:sha256` strings, sorted; interior nodes hash the concatenation of their two
children (an odd node is paired with itself). Ledger tables are hashed by content, canonical
JSON rows without the volatile columns (`curation.ledger.schema.VOLATILE_COLUMNS`: step timings, the
run's start and end, host, library versions), so the root is the same for any worker count and for
any re-run of the same recipe on the same inputs. Every field of the manifest is a leaf too (its
digest, `manifest_schema.field_digests`), and so is every file of the stage's hand-offs (Megatron's and
any other trainer format's). One
root lets an auditor confirm a whole stage (what a trainer reads: settings, shards, sampling plans,
hand-off, ledger) at once.
"""
from __future__ import annotations

import hashlib
import json
from functools import partial
from pathlib import Path

from curation.core.parts import BATCH_ROWS
from curation.ledger.schema import VOLATILE_COLUMNS
from curation.mixture.handoffs import leaves as handoff_leaves


def merkle_root(leaves: list[str]) -> str:
    level = [hashlib.sha256(leaf.encode()).digest() for leaf in sorted(leaves)]
    if not level:
        return hashlib.sha256(b"").hexdigest()
    while len(level) > 1:
        if len(level) % 2:
            level.append(level[-1])
        level = [hashlib.sha256(level[i] + level[i + 1]).digest() for i in range(0, len(level), 2)]
    return level[0].hex()


def rows_digest(rows) -> str:
    """sha256 of the rows (any iterable of dicts) as one canonical JSON list, volatile columns left out. The
    list is hashed as it is encoded, never held whole (`batches_digest`)."""
    def batches():
        batch: list[dict] = []
        for r in rows:
            batch.append({k: v for k, v in r.items() if k not in VOLATILE_COLUMNS})
            if len(batch) == BATCH_ROWS:
                yield batch
                batch = []
        yield batch
    return batches_digest(batches())


def batches_digest(batches) -> str:
    """sha256 of the rows of `batches` (lists of dicts without volatile columns) as one canonical JSON list.
    `json.dumps` of a list is its items' encodings joined by `,` inside `[` `]`, so each batch is encoded by one
    call (the C encoder loops over its rows) and its brackets dropped: the same bytes as encoding row by row."""
    h = hashlib.sha256(b"[")
    first = True
    for batch in batches:
        if not batch:
            continue
        text = json.dumps(batch, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)
        h.update((b"" if first else b",") + text[1:-1].encode())
        first = False
    h.update(b"]")
    return h.hexdigest()


def _parquet_batches(path: Path):
    import pyarrow.parquet as pq

    # maps as dicts, as DuckDB returns them (pyarrow's default is a list of pairs), so that a Parquet table
    # and its DuckDB copy hash the same rows; the volatile columns dropped before the rows are made
    for batch in pq.ParquetFile(path).iter_batches(batch_size=BATCH_ROWS):
        keep = [c for c in batch.schema.names if c not in VOLATILE_COLUMNS]
        yield batch.select(keep).to_pylist(maps_as_pydicts="strict")


def table_digest(path: Path) -> str:
    return batches_digest(_parquet_batches(path))


def ledger_digests(ledger_dir: Path, exclude: tuple[str, ...] = ()) -> dict[str, str]:
    return {p.stem: table_digest(p) for p in sorted(ledger_dir.glob("*.parquet")) if p.stem not in exclude}


def duckdb_digests(db: Path) -> tuple[dict[str, str], dict[str, str]]:
    """Content digests of the tables in `ledger.duckdb` (same canonical rows as `table_digest`, so a table
    that matches its Parquet file has the same digest) and the SQL of its views."""
    import duckdb

    con = duckdb.connect(str(db), read_only=True)
    try:
        tables = [r[0] for r in con.execute("SELECT table_name FROM duckdb_tables() WHERE NOT internal "
                                            "ORDER BY table_name").fetchall()]
        digests = {}
        for t in tables:
            cur = con.execute(f'SELECT * FROM "{t}"')
            cols = [d[0] for d in cur.description]
            digests[t] = rows_digest(dict(zip(cols, r)) for batch in iter(partial(cur.fetchmany, BATCH_ROWS), [])
                                     for r in batch)
        views = dict(con.execute("SELECT view_name, sql FROM duckdb_views() WHERE NOT internal").fetchall())
    finally:
        con.close()
    return digests, views


def manifest_leaves(manifest: dict, fields: dict[str, str]) -> list[str]:
    """Every file a trainer reads (shards, plans, packing, hand-off), every ledger table and every field."""
    leaves = [f"{f['path']}:{f['sha256']}" for s in manifest["sources"] for f in s["files"]]
    leaves += [f"{s['plan']['path']}:{s['plan']['sha256']}" for s in manifest["sources"] if "plan" in s]
    if manifest.get("long_context"):
        pack = manifest["long_context"]["packing"]
        leaves.append(f"{pack['path']}:{pack['sha256']}")
    leaves += handoff_leaves(manifest)          # every trainer format's files (`curation.mixture.handoffs`)
    leaves += [f"ledger/{t}:{d}" for t, d in manifest["ledger_tables"].items()]
    leaves += [f"field/{k}:{d}" for k, d in fields.items()]
    return leaves
