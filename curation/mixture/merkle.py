"""A Merkle root over a stage's files and ledger tables, carried in its manifest.

Leaves are `name:sha256` strings, sorted; interior nodes hash the concatenation of their two
children (an odd node is paired with itself). Ledger tables are hashed by content, canonical
JSON rows without the volatile columns (`curation.ledger.schema.VOLATILE_COLUMNS`: step timings, the
run's start and end, host, library versions), so the root is the same for any worker count and for
any re-run of the same recipe on the same inputs. A table of at most `CHUNK_ROWS` rows is hashed as one
JSON list; a larger one (the near-duplicate tables of a large corpus) in chunks of `CHUNK_ROWS` rows, its
digest the sha256 of its chunks' digests (`combine`), so that the run's tasks hash the chunks of a table in
parallel (`ledger_digests` with the executor's `map`) and the driver only combines them. Every field of the manifest is a leaf too (its
digest, `manifest_schema.field_digests`), and so is every file of the stage's hand-offs (Megatron's and
any other trainer format's). One
root lets an auditor confirm a whole stage (what a trainer reads: settings, shards, sampling plans,
hand-off, ledger) at once.
"""
from __future__ import annotations

import hashlib
import json
import sys
from collections.abc import Callable
from functools import partial
from pathlib import Path

from curation.core.parts import BATCH_ROWS
from curation.errors import CurateError
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


# Rows per chunk of a table's digest: a table of at most this many rows (every table of the demo recipes, and
# every table that does not grow with the corpus) has the digest of its rows as one list, as before chunks.
# The near-duplicate tables of the 1M-document scale run (76k and 83k rows) are three chunks each.
CHUNK_ROWS = 1 << 15
# what a chunked digest hashes before its chunks' digests: no JSON list starts with it
_CHUNKED = b"curate-table-chunks/1\n"


def combine(chunks: list[str]) -> str:
    """The digest of a table from its chunks' digests, in order: the one chunk's own, or the sha256 of all."""
    if len(chunks) == 1:
        return chunks[0]
    return hashlib.sha256(_CHUNKED + b"".join(bytes.fromhex(d) for d in chunks)).hexdigest()


class _Chunks:
    """Digests of consecutive chunks of `chunk_rows` rows, each the sha256 of its rows as one canonical JSON
    list. `json.dumps` of a list is its items' encodings joined by `,` inside `[` `]`, so each batch is encoded
    by one call (the C encoder loops over its rows) and its brackets dropped: the same bytes as encoding row by
    row."""

    def __init__(self, chunk_rows: int):
        self.chunk_rows, self.done, self.h, self.n = chunk_rows, [], hashlib.sha256(b"["), 0

    def add(self, batch: list[dict]) -> None:
        while batch:
            take, batch = batch[:self.chunk_rows - self.n], batch[self.chunk_rows - self.n:]
            text = json.dumps(take, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)
            self.h.update((b"," if self.n else b"") + text[1:-1].encode())
            self.n += len(take)
            if self.n == self.chunk_rows:
                self._close()

    def _close(self) -> None:
        self.h.update(b"]")
        self.done.append(self.h.hexdigest())
        self.h, self.n = hashlib.sha256(b"["), 0

    def digests(self) -> list[str]:
        if self.n or not self.done:   # the last, partial chunk; no rows at all: one empty list
            self._close()
        return self.done


def rows_digest(rows) -> str:
    """The digest of the rows (any iterable of dicts), volatile columns left out, never held whole."""
    def batches():
        batch: list[dict] = []
        for r in rows:
            batch.append({k: v for k, v in r.items() if k not in VOLATILE_COLUMNS})
            if len(batch) == BATCH_ROWS:
                yield batch
                batch = []
        yield batch
    return batches_digest(batches())


def batches_digest(batches, chunk_rows: int | None = None) -> str:
    """The digest of the rows of `batches` (lists of dicts without volatile columns). `chunk_rows`: default
    `CHUNK_ROWS`; `sys.maxsize` gives the digest a large table had before chunks (`curate verify` accepts it)."""
    chunks = _Chunks(chunk_rows or CHUNK_ROWS)
    for batch in batches:
        chunks.add(batch)
    return combine(chunks.digests())


def _parquet_batches(path: Path, start: int = 0, stop: int | None = None):
    """Rows `start` to `stop` of a Parquet file as lists of dicts, the volatile columns dropped before the rows are
    made; only the row groups that hold them are read."""
    import pyarrow.parquet as pq

    f = pq.ParquetFile(path)
    stop = f.metadata.num_rows if stop is None else stop
    groups, first, at = [], None, 0
    for g in range(f.metadata.num_row_groups):
        rows = f.metadata.row_group(g).num_rows
        if at + rows > start and at < stop:
            groups.append(g)
            first = at if first is None else first
        at += rows
    skip, left = start - (first or 0), stop - start
    # maps as dicts, as DuckDB returns them (pyarrow's default is a list of pairs), so that a Parquet table
    # and its DuckDB copy hash the same rows
    for batch in f.iter_batches(batch_size=BATCH_ROWS, row_groups=groups) if groups else ():
        if skip >= batch.num_rows:
            skip -= batch.num_rows
            continue
        batch = batch.slice(skip, left)
        skip, left = 0, left - batch.num_rows
        keep = [c for c in batch.schema.names if c not in VOLATILE_COLUMNS]
        yield batch.select(keep).to_pylist(maps_as_pydicts="strict")
        if not left:
            return


def table_digest(path: Path, chunk_rows: int | None = None) -> str:
    return batches_digest(_parquet_batches(path), chunk_rows)


def chunk_digests(path: str, first: int, last: int, chunk_rows: int) -> list[str]:
    """A task: the digests of chunks `first` to `last` (exclusive) of the table in `path`."""
    chunks = _Chunks(chunk_rows)
    for batch in _parquet_batches(Path(path), first * chunk_rows, last * chunk_rows):
        chunks.add(batch)
    return chunks.digests()


# chunks per digest task: 8 × 2^15 rows, ~260k rows of a near-duplicate table (about 1.7 s on one core)
CHUNKS_PER_TASK = 8


def ledger_digests(ledger_dir: Path, exclude: tuple[str, ...] = (), tasks: Callable | None = None) -> dict[str, str]:
    """Each table's digest. `tasks` (an executor's `map`, whose tasks read `ledger_dir`): the chunks of every
    table of more than `CHUNK_ROWS` rows are hashed by tasks, `CHUNKS_PER_TASK` each, and combined here; the
    driver reads none of their rows."""
    import pyarrow.parquet as pq

    paths = {p.stem: p for p in sorted(ledger_dir.glob("*.parquet")) if p.stem not in exclude}
    chunked = {}   # table -> its number of chunks, for the tables the tasks hash
    for t, p in paths.items() if tasks is not None else ():
        if (rows := pq.ParquetFile(p).metadata.num_rows) > CHUNK_ROWS:
            chunked[t] = -(-rows // CHUNK_ROWS)
    by_tasks = _chunked_digests(tasks, chunk_digests, {t: (str(paths[t]),) for t in chunked}, chunked)
    return {t: by_tasks[t] if t in chunked else table_digest(p) for t, p in paths.items()}


def _chunked_digests(tasks: Callable | None, fn: Callable, where: dict[str, tuple], chunks: dict[str, int]) -> dict:
    """Each table of `chunks` (table -> its number of chunks) hashed by `tasks`, `CHUNKS_PER_TASK` chunks a
    task (`fn(*where[table], first, last, CHUNK_ROWS)`), its chunks' digests combined here."""
    calls = {t: [(f"{t}/{first}", (*where[t], first, min(first + CHUNKS_PER_TASK, n), CHUNK_ROWS))
                 for first in range(0, n, CHUNKS_PER_TASK)] for t, n in chunks.items()}
    done = tasks(fn, [c for cs in calls.values() for c in cs], "digest") if calls and tasks else {}
    return {t: combine([d for key, _ in calls[t] for d in done[key]]) for t in chunks}


def duckdb_digests(db: Path, tasks: Callable | None = None) -> tuple[dict[str, str], dict[str, str]]:
    """Content digests of the tables in `ledger.duckdb` (same canonical rows as `table_digest`, so a table
    that matches its Parquet file has the same digest) and the SQL of its views. `tasks` (a `map`, as for
    `ledger_digests`): the chunks of a table of more than `CHUNK_ROWS` rows are hashed by tasks, each reading
    its range of row ids (a table written once has the ids 0 to n - 1 in insertion order; one with gaps, a
    table edited in place, is hashed here, in order, as a whole)."""
    import duckdb

    con = duckdb.connect(str(db), read_only=True)
    try:
        tables = [r[0] for r in con.execute("SELECT table_name FROM duckdb_tables() WHERE NOT internal "
                                            "ORDER BY table_name").fetchall()]
        chunked = {}   # table -> its number of chunks, for the tables the tasks hash
        for t in tables if tasks is not None else ():
            rows, last = con.execute(f'SELECT count(*), max(rowid) FROM "{t}"').fetchone()
            if rows > CHUNK_ROWS and last == rows - 1:
                chunked[t] = -(-rows // CHUNK_ROWS)
        digests = {}
        for t in tables:
            if t in chunked:
                continue
            cur = con.execute(f'SELECT * FROM "{t}"')
            cols = [d[0] for d in cur.description]
            digests[t] = rows_digest(dict(zip(cols, r)) for batch in iter(partial(cur.fetchmany, BATCH_ROWS), [])
                                     for r in batch)
        views = dict(con.execute("SELECT view_name, sql FROM duckdb_views() WHERE NOT internal").fetchall())
    finally:
        con.close()
    digests.update(_chunked_digests(tasks, duckdb_chunk_digests, {t: (str(db), t) for t in chunked}, chunked))
    return dict(sorted(digests.items())), views


def duckdb_chunk_digests(db: str, table: str, first: int, last: int, chunk_rows: int) -> list[str]:
    """A task: the digests of chunks `first` to `last` (exclusive) of `table` in the DuckDB file `db`, by row id."""
    import duckdb

    con = duckdb.connect(db, read_only=True)
    try:
        cur = con.execute(f'SELECT * FROM "{table}" WHERE rowid >= ? AND rowid < ? ORDER BY rowid',
                          [first * chunk_rows, last * chunk_rows])
        cols = [d[0] for d in cur.description]
        chunks = _Chunks(chunk_rows)
        for batch in iter(partial(cur.fetchmany, BATCH_ROWS), []):
            chunks.add([{c: v for c, v in zip(cols, r) if c not in VOLATILE_COLUMNS} for r in batch])
        return chunks.digests()
    finally:
        con.close()


# one of this module's chunk tasks in a fresh interpreter: (function name, arguments) in, its digests out, as JSON
_CHUNK_TASK = ("import json, sys; from curation.mixture import merkle; name, args = json.loads(sys.argv[1]); "
               "print(json.dumps(getattr(merkle, name)(*args)))")


def processes_map(fn, calls: list[tuple[str, tuple]], label: str) -> dict:
    """This module's tasks (the chunks of the large ledger tables, in Parquet and in DuckDB) on every core, each a
    fresh interpreter: a table of a billion-document run is hashed in minutes instead of most of an hour. Not
    `multiprocessing`: its `spawn` re-runs the caller's main module (a script without a `__main__` guard
    would start again) and `fork` copies this process's threads' locks (DuckDB's, a Ray client's). Only a
    table of more than `CHUNK_ROWS` rows makes a task, so a demo's verify starts no process. `curate verify`
    uses it; a run hashes with its executor's tasks instead."""
    import json
    import os
    import subprocess
    from concurrent.futures import ThreadPoolExecutor

    import curation

    workers = min(len(calls), os.cpu_count() or 1)
    # a process starts in ~0.5 s (pyarrow, duckdb) and a full task hashes 2^18 rows in ~1.7 s: below four
    # full tasks' rows in all (the 1M-document scale run's tables: 76k and 83k rows) one process is faster
    rows = sum((args[-2] - args[-3]) * args[-1] for _, args in calls)
    if workers <= 1 or rows < 4 * CHUNKS_PER_TASK * CHUNK_ROWS:
        return {key: fn(*args) for key, args in calls}
    root = str(Path(curation.__file__).resolve().parents[1])   # this curation, installed or a checkout
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [root, os.environ.get("PYTHONPATH")]))}

    def run(key: str, args: tuple):
        p = subprocess.run([sys.executable, "-c", _CHUNK_TASK, json.dumps([fn.__name__, list(args)])],
                           capture_output=True, text=True, env=env)
        if p.returncode:
            raise CurateError(f"hashing {key} of the ledger failed in a worker process: {p.stderr[-2000:]}")
        return json.loads(p.stdout)

    with ThreadPoolExecutor(workers) as pool:
        futures = {key: pool.submit(run, key, args) for key, args in calls}
        return {key: f.result() for key, f in futures.items()}


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
