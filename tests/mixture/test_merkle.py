"""Ledger table digests: a Parquet table and its DuckDB copy hash the same rows, map columns included; a large
table is hashed in chunks, by tasks where the run has them."""
import duckdb
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from curation.mixture.merkle import duckdb_digests, table_digest


def test_a_map_column_digests_the_same_in_parquet_and_duckdb(tmp_path):
    counts = pa.array([[("image_near_duplicate", 1), ("small_image", 2)], []],
                      type=pa.map_(pa.string(), pa.int64()))
    pq.write_table(pa.table({"source": ["a", "b"], "images_dropped_by_reason": counts}), tmp_path / "t.parquet")
    con = duckdb.connect(str(tmp_path / "l.duckdb"))
    con.execute(f"CREATE TABLE t AS SELECT * FROM read_parquet('{tmp_path / 't.parquet'}')")
    con.close()
    digests, _ = duckdb_digests(tmp_path / "l.duckdb")
    assert digests["t"] == table_digest(tmp_path / "t.parquet")
    con = duckdb.connect(str(tmp_path / "l.duckdb"))
    con.execute("UPDATE t SET images_dropped_by_reason = MAP {'small_image': 3} WHERE source = 'b'")
    con.close()
    assert duckdb_digests(tmp_path / "l.duckdb")[0]["t"] != table_digest(tmp_path / "t.parquet")


def _row_by_row(rows) -> str:
    """The digest's definition: each row (volatile columns out) as canonical JSON, joined by `,` in `[` `]`."""
    import hashlib
    import json

    from curation.ledger.schema import VOLATILE_COLUMNS
    text = ",".join(json.dumps({k: v for k, v in r.items() if k not in VOLATILE_COLUMNS}, sort_keys=True,
                               separators=(",", ":"), ensure_ascii=False, default=str) for r in rows)
    return hashlib.sha256(f"[{text}]".encode()).hexdigest()


def test_a_table_hashed_a_batch_at_a_time_is_its_rows_hashed_one_by_one(tmp_path, monkeypatch):
    """`batches_digest` encodes a whole batch per `json.dumps` call: the same bytes as row by row, whatever the
    batch size, with volatile columns, nulls, floats, nested maps and lists, and text outside ASCII."""
    from curation.mixture import merkle
    from curation.mixture.merkle import rows_digest

    n = 2_500
    table = pa.table({
        "source": [f"src-{i % 7}" for i in range(n)],
        "id": [f"d{i:05d}\u00e9\u4e2d" if i % 3 else None for i in range(n)],
        "score": [i / 7 if i % 5 else None for i in range(n)],
        "counts": pa.array([[("a", i), ("b", 2 * i)] if i % 4 else [] for i in range(n)],
                           type=pa.map_(pa.string(), pa.int64())),
        "members": [[f"m{j}" for j in range(i % 3)] for i in range(n)],
        "seconds": [float(i) for i in range(n)],                 # volatile: left out of the digest
    })
    pq.write_table(table, tmp_path / "t.parquet")
    want = _row_by_row(table.to_pylist(maps_as_pydicts="strict"))
    for rows in (1, 999, 1_000, n, 8_192):
        monkeypatch.setattr(merkle, "BATCH_ROWS", rows)
        assert table_digest(tmp_path / "t.parquet") == want, rows
        assert rows_digest(table.to_pylist(maps_as_pydicts="strict")) == want, rows
    assert rows_digest([]) == _row_by_row([]) and "seconds" in merkle.VOLATILE_COLUMNS


def _table(n: int) -> pa.Table:
    return pa.table({"cluster": [f"s/{i:05d}" for i in range(n)], "members": [[f"{i}", f"{i}b"] for i in range(n)],
                     "seconds": [0.5] * n})


def test_a_table_of_more_than_a_chunk_is_the_digest_of_its_chunks_digests(tmp_path, monkeypatch):
    """Up to `CHUNK_ROWS` rows a table's digest is its rows' list (every demo recipe's tables: their manifests
    did not move); beyond, the sha256 of each chunk's list, in order. Parquet (any row groups), DuckDB and rows
    agree, and so do the chunks hashed by tasks, a few per task, at any boundaries."""
    import hashlib

    from curation.mixture import merkle
    from curation.runtime.local import LocalExecutor
    monkeypatch.setattr(merkle, "CHUNK_ROWS", 7)
    monkeypatch.setattr(merkle, "BATCH_ROWS", 3)
    monkeypatch.setattr(merkle, "CHUNKS_PER_TASK", 2)
    ex, calls = LocalExecutor(progress=False), []

    def counted(fn, some, label):   # the executor's `map`, counting the tasks
        calls.extend(some)
        return ex.map(fn, some, label)
    for n in (0, 1, 7, 8, 14, 20, 57):
        rows = _table(n).to_pylist()
        path = tmp_path / "ledger" / "t.parquet"
        path.parent.mkdir(exist_ok=True)
        pq.write_table(_table(n), path, row_group_size=5)
        chunks = [_row_by_row(rows[i:i + 7]) for i in range(0, max(n, 1), 7)]
        want = chunks[0] if len(chunks) == 1 else \
            hashlib.sha256(b"curate-table-chunks/1\n" + b"".join(bytes.fromhex(c) for c in chunks)).hexdigest()
        assert merkle.table_digest(path) == merkle.rows_digest(rows) == want, n
        con = duckdb.connect(str(tmp_path / "l.duckdb"))
        con.execute(f"CREATE OR REPLACE TABLE t AS SELECT * FROM read_parquet('{path}')")
        con.close()
        assert duckdb_digests(tmp_path / "l.duckdb")[0]["t"] == want, n
        calls.clear()
        assert merkle.ledger_digests(path.parent, tasks=counted) == {"t": want}, n
        assert len(calls) == (-(-len(chunks) // 2) if n > 7 else 0), n   # tasks only for a table of chunks
        calls.clear()
        assert duckdb_digests(tmp_path / "l.duckdb", tasks=counted)[0] == {"t": want}, n   # by row ids
        assert len(calls) == (-(-len(chunks) // 2) if n > 7 else 0), n
    assert merkle.ledger_digests(path.parent) == {"t": want}


@pytest.mark.slow   # starts processes
def test_verify_hashes_the_chunks_of_large_tables_on_every_core(tmp_path, monkeypatch):
    """`curate verify`'s map: the chunks of a large table, in Parquet and in its DuckDB copy, hashed in fresh
    processes, give the digests of one process; a DuckDB table edited in place (a row deleted and inserted
    again, so it moved to the end) is hashed in its new order, and so differs from its Parquet file."""
    from curation.mixture import merkle
    from curation.mixture.merkle import processes_map
    monkeypatch.setattr(merkle, "CHUNK_ROWS", 10)
    monkeypatch.setattr(merkle, "CHUNKS_PER_TASK", 2)
    pq.write_table(_table(95), tmp_path / "clusters.parquet", row_group_size=8)
    pq.write_table(_table(4), tmp_path / "small.parquet")
    tasks = []

    def counted(fn, calls, label):
        tasks.extend(calls)
        return processes_map(fn, calls, label)
    assert merkle.ledger_digests(tmp_path, tasks=counted) == merkle.ledger_digests(tmp_path)
    assert len(tasks) == 5                                      # 10 chunks, 2 per task
    con = duckdb.connect(str(tmp_path / "l.duckdb"))
    for t in ("clusters", "small"):
        con.execute(f"CREATE TABLE {t} AS SELECT * FROM read_parquet('{tmp_path / t}.parquet')")
    con.close()
    tasks.clear()
    by_tasks = duckdb_digests(tmp_path / "l.duckdb", tasks=counted)[0]
    assert by_tasks == duckdb_digests(tmp_path / "l.duckdb")[0] == merkle.ledger_digests(tmp_path)
    assert len(tasks) == 5
    con = duckdb.connect(str(tmp_path / "l.duckdb"))
    con.execute("DELETE FROM clusters WHERE cluster = 's/00012'")
    con.execute("INSERT INTO clusters SELECT * FROM read_parquet(?) WHERE cluster = 's/00012'",
                [str(tmp_path / "clusters.parquet")])   # the same rows, one moved to the end
    con.close()
    moved = duckdb_digests(tmp_path / "l.duckdb", tasks=counted)[0]
    assert moved == duckdb_digests(tmp_path / "l.duckdb")[0]
    assert moved["clusters"] != by_tasks["clusters"] and moved["small"] == by_tasks["small"]


def test_chunk_digests_read_only_their_rows(tmp_path):
    from curation.mixture.merkle import chunk_digests
    path = tmp_path / "t.parquet"
    pq.write_table(_table(23), path, row_group_size=4)
    rows = _table(23).to_pylist()
    assert chunk_digests(str(path), 1, 3, 5) == [_row_by_row(rows[5:10]), _row_by_row(rows[10:15])]
    assert chunk_digests(str(path), 4, 9, 5) == [_row_by_row(rows[20:23])]   # the last chunk: the rows left


@pytest.mark.slow   # Ray
def test_ray_tasks_hash_a_tables_chunks_as_the_driver_does(tmp_path, monkeypatch, ray_local):
    """The chunk size travels with each task (a worker's module keeps its own `CHUNK_ROWS`)."""
    from curation.mixture import merkle
    from curation.runtime.ray_executor import RayExecutor
    monkeypatch.setattr(merkle, "CHUNK_ROWS", 10)
    monkeypatch.setattr(merkle, "CHUNKS_PER_TASK", 3)
    pq.write_table(_table(95), tmp_path / "clusters.parquet", row_group_size=8)
    pq.write_table(_table(4), tmp_path / "small.parquet")
    with RayExecutor(workers=2, progress=False) as rt:
        by_tasks = merkle.ledger_digests(tmp_path, tasks=rt.map)
    assert by_tasks == merkle.ledger_digests(tmp_path)
    assert by_tasks["small"] == _row_by_row(_table(4).to_pylist())


def test_verify_accepts_a_large_tables_digest_from_before_chunks(tmp_path, monkeypatch):
    """A manifest written before large tables were digested in chunks holds their rows' digest as one list:
    `curate verify` still recognises it (and only for a table of more rows than a chunk)."""
    import sys

    from curation.mixture import merkle
    from curation.mixture.verify import _digested_whole
    monkeypatch.setattr(merkle, "CHUNK_ROWS", 10)
    pq.write_table(_table(25), tmp_path / "big.parquet", row_group_size=4)
    pq.write_table(_table(6), tmp_path / "small.parquet")
    before = _row_by_row(_table(25).to_pylist())
    assert merkle.table_digest(tmp_path / "big.parquet") != before
    assert merkle.table_digest(tmp_path / "big.parquet", chunk_rows=sys.maxsize) == before
    assert _digested_whole(tmp_path / "big.parquet", before)
    assert not _digested_whole(tmp_path / "big.parquet", _row_by_row(_table(24).to_pylist()))
    assert not _digested_whole(tmp_path / "small.parquet", "0" * 64)   # one chunk: one definition only
