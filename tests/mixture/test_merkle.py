"""Ledger table digests: a Parquet table and its DuckDB copy hash the same rows, map columns included."""
import duckdb
import pyarrow as pa
import pyarrow.parquet as pq

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
