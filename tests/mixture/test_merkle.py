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
