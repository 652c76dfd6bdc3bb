"""Ledger tables whose rows stay in the tasks' part files (`PartRows`): DuckDB copies them into `ledger.duckdb`
and the table's Parquet file in the parts' order, with the same rows, types and digests as rows given as a list,
and the copied `ledger.duckdb` needs none of the part files."""
from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from curation.core.parts import PartRows
from curation.ledger import store
from curation.ledger.schema import SCHEMAS
from curation.ledger.store import write_ledger
from curation.mixture.merkle import duckdb_digests, rows_digest, table_digest

ROOT = Path(__file__).resolve().parents[2]
COLUMNS = SCHEMAS["clusters"].names   # run, cluster, kept_source, kept_id, size, members, sources


def _cluster(i: int) -> dict:
    return {"cluster": f"s/{i:06d}", "kept_source": "s", "kept_id": f"{i:06d}", "size": 2 + i % 3,
            "members": [f"{i:06d}", f"{i:06d}b"][: 1 + i % 2], "sources": ["s"] if i % 5 else ["s", "t"],
            "shard": f"{i % 7:03d}"}   # a column of the task's file the table does not take


PART = pa.Table.from_pylist([_cluster(0)]).schema   # the task's file: the table's columns and one more


def _parts(tmp_path, sizes: list[int]) -> tuple[list, list[dict]]:
    """Part files named so that their lexical order is not the table's order; the rows the table must hold."""
    paths, want, start = [], [], 0
    for k, n in enumerate(sizes):
        rows = [_cluster(i) for i in range(start, start + n)]
        start += n
        path = tmp_path / "work" / f"part-{len(sizes) - k:03d}.parquet"
        path.parent.mkdir(parents=True, exist_ok=True)
        pq.write_table(pa.Table.from_pylist(rows, schema=PART), path, row_group_size=1000)
        paths.append(path)
        want += [{"run": "r1", **{c: r[c] for c in COLUMNS if c != "run"}} for r in rows]
    return paths, want


def _db_rows(db, table: str) -> list[dict]:
    con = duckdb.connect(str(db), read_only=True)
    try:
        cur = con.execute(f"SELECT * FROM {table}")
        cols = [d[0] for d in cur.description]
        return [dict(zip(cols, r)) for r in cur.fetchall()]
    finally:
        con.close()


def _types(db) -> list[tuple]:
    con = duckdb.connect(str(db), read_only=True)
    try:
        return con.execute("SELECT table_name, column_name, data_type FROM duckdb_columns() WHERE NOT internal "
                           "ORDER BY table_name, column_index").fetchall()
    finally:
        con.close()


@pytest.mark.slow
def test_part_files_are_copied_in_their_order_with_the_rows_and_types_of_a_list(tmp_path):
    paths, want = _parts(tmp_path, [2500, 0, 1, 4000])
    part = PartRows(paths, COLUMNS, {"run": "r1"})
    assert len(part) == len(want) and list(part) == want   # iterated in batches, in the parts' order
    by_parts = write_ledger({"clusters": part}, tmp_path / "a")
    by_list = write_ledger({"clusters": want}, tmp_path / "b")
    assert pq.read_table(tmp_path / "a" / "clusters.parquet").to_pylist() == want
    assert _db_rows(by_parts, "clusters") == want
    assert _types(by_parts) == _types(by_list)
    assert pq.read_schema(tmp_path / "a" / "clusters.parquet").names == COLUMNS
    # the manifests' digests: the same whether the rows came as parts or as a list, Parquet or DuckDB
    assert table_digest(tmp_path / "a" / "clusters.parquet") == table_digest(tmp_path / "b" / "clusters.parquet") \
        == rows_digest(want) == duckdb_digests(by_parts)[0]["clusters"]
    assert not (tmp_path / "a" / ".duckdb-spill").exists()


@pytest.mark.slow
def test_a_ledger_written_from_parts_needs_none_of_them(tmp_path):
    paths, want = _parts(tmp_path, [10, 20])
    db = write_ledger({"clusters": PartRows(paths, COLUMNS, {"run": "r1"})}, tmp_path / "ledger")
    alone = tmp_path / "mailed" / "ledger.duckdb"
    alone.parent.mkdir()
    shutil.copy(db, alone)
    shutil.rmtree(tmp_path / "work")
    shutil.rmtree(tmp_path / "ledger")
    assert _db_rows(alone, "clusters") == want


@pytest.mark.slow
def test_no_part_files_give_an_empty_table(tmp_path):
    db = write_ledger({"clusters": PartRows([], COLUMNS, {"run": "r1"})}, tmp_path / "ledger")
    assert _db_rows(db, "clusters") == []
    assert pq.read_table(tmp_path / "ledger" / "clusters.parquet").num_rows == 0


@pytest.mark.slow
def test_a_table_larger_than_duckdbs_memory_is_copied_in_order(tmp_path, monkeypatch):
    """Beyond `DUCKDB_MEMORY` the copy spills to disk; the rows keep their order. (Compared as Arrow tables:
    the canonical digests of 300,000 rows would take most of this test's time; they are tested above.)"""
    monkeypatch.setattr(store, "DUCKDB_MEMORY", "32MB")
    monkeypatch.setattr(store, "DUCKDB_THREADS", 1)
    paths, _ = _parts(tmp_path, [150_000, 150_000])
    db = write_ledger({"clusters": PartRows(paths, COLUMNS, {"run": "r1"})}, tmp_path / "ledger")
    schema = SCHEMAS["clusters"]
    parts = pa.concat_tables(pq.read_table(p).select(COLUMNS[1:]) for p in paths)
    want = parts.add_column(0, "run", pa.array(["r1"] * parts.num_rows)).cast(schema)
    assert pq.read_table(tmp_path / "ledger" / "clusters.parquet").cast(schema).equals(want)
    con = duckdb.connect(str(db), read_only=True)
    try:
        assert con.sql("SELECT * FROM clusters").to_arrow_table().cast(schema).equals(want)
    finally:
        con.close()


def test_rows_are_hashed_as_the_json_list_they_make():
    rows = [{"b": "é\u2028", "a": [1, {"z": None}], "seconds": 3.5}, {"x": 1.5e300, "y": True}, {}]
    for some in ([], rows[:1], rows):
        blob = json.dumps([{k: v for k, v in r.items() if k != "seconds"} for r in some], sort_keys=True,
                          separators=(",", ":"), ensure_ascii=False, default=str)
        assert rows_digest(iter(some)) == rows_digest(some) == hashlib.sha256(blob.encode()).hexdigest()


PROBE = r"""
import json, sys
from pathlib import Path
import pyarrow as pa, pyarrow.parquet as pq
from curation.core.parts import PartRows
from curation.ledger import store
from curation.ledger.schema import SCHEMAS
from tests.peak import peak, reset

store.DUCKDB_MEMORY = "64MB"
out, n = Path(sys.argv[1]), int(sys.argv[2])
cols = SCHEMAS["clusters"].names

def part(name, count):
    path = out / "work" / f"{name}.parquet"
    path.parent.mkdir(parents=True, exist_ok=True)
    w = pq.ParquetWriter(path, SCHEMAS["clusters"].remove(0))
    for start in range(0, count, 10000):
        ids = [f"{i:08d}" for i in range(start, min(count, start + 10000))]
        w.write_table(pa.table({"cluster": [f"web/{i}" for i in ids], "kept_source": ["web"] * len(ids),
                                "kept_id": ids, "size": [3] * len(ids), "members": [[i, i + "b", i + "c"] for i in ids],
                                "sources": [["web"]] * len(ids)}, schema=w.schema))
    w.close()
    return PartRows([path], cols, {"run": "r"})

store.write_ledger({"clusters": part("warm", 5000)}, out / "warm")   # duckdb, pyarrow and the schemas loaded
big = part("big", n)   # made before the measurement: its Python rows are the probe's, not write_ledger's
before = reset()
store.write_ledger({"clusters": big}, out / "big")
after = peak()
print(json.dumps({"growth_mb": (after - before) / 2**20, "rows": pq.read_metadata(out / "big" / "clusters.parquet").num_rows}))
"""


def _ledger_growth(tmp_path, n: int) -> dict:
    import subprocess
    import sys

    folder = tmp_path / f"n{n}"
    folder.mkdir()
    done = subprocess.run([sys.executable, "-c", PROBE, str(folder), str(n)], capture_output=True, text=True,
                          check=True, cwd=ROOT)
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.mark.slow
def test_the_driver_memory_to_write_a_part_table_does_not_grow_with_its_rows(tmp_path):
    """Writing a ledger table of 400,000 clusters from its part file costs the process at most DuckDB's memory
    limit (64 MB here) more than 40,000 do: as Python rows, the 400,000 take about 480 MB more (measured). Measured
    2026-12-08: +34 MB for 40,000, +76 MB for 400,000, +77 MB for 1,200,000 (a plateau). Until then the probe's
    limit never applied (`bounded` read `DUCKDB_MEMORY` when it was defined, so DuckDB held up to 256 MB: +256 MB
    at 1,200,000) and the probe read `ru_maxrss`, which measures nothing in a child of a large pytest worker."""
    small, big = _ledger_growth(tmp_path, 40_000), _ledger_growth(tmp_path, 400_000)
    assert big["rows"] == 400_000
    assert big["growth_mb"] < small["growth_mb"] + 64, (small, big)


def test_part_rows_compare_and_index_as_the_list_of_rows_they_stand_for(tmp_path):
    """A run's `rows[...]` may be a PartRows: it equals, indexes and slices like the list of row dicts it
    replaces (the Python API and the tests read it so), in the parts' order."""
    paths = []
    for k, values in enumerate(([1, 2], [3])):
        paths.append(tmp_path / f"part-{k}.parquet")
        pq.write_table(pa.table({"a": values, "extra": ["x"] * len(values)}), paths[-1])
    rows = PartRows(paths, ["run", "a"], {"run": "r1"})
    expected = [{"run": "r1", "a": 1}, {"run": "r1", "a": 2}, {"run": "r1", "a": 3}]
    assert rows == expected and expected == rows and rows == PartRows(paths, ["run", "a"], {"run": "r1"})
    assert rows != expected[:2] and rows != PartRows(paths[:1], ["run", "a"], {"run": "r1"})
    assert rows[0] == expected[0] and rows[-1] == expected[-1] and rows[1:] == expected[1:]
    pq.write_table(pa.table({"a": pa.array([], pa.int64())}), tmp_path / "empty.parquet")
    empty = PartRows([tmp_path / "empty.parquet"], ["run", "a"], {"run": "r1"})
    assert empty == [] and not empty and len(empty) == 0
    [only] = PartRows(paths[1:], ["a"])
    assert only == {"a": 3}
