"""Drop lists written from Arrow columns (`write_drop_columns`, what the dedup assemblies use) are the files
`write_drops` writes from the same rows, byte for byte: one reason for all or a column of them, evidence
missing or not, no rows, and columns in several chunks."""
from __future__ import annotations

import pyarrow as pa
import pytest

from curation.steps.droplist import read_drops, write_drop_columns, write_drops

ROWS = [("d3", "exact_duplicate", "web/d1"), ("d7", "url_duplicate", None), ("d9", "exact_duplicate", "")]


@pytest.mark.parametrize("rows", [ROWS, ROWS[:1], []], ids=["three", "one", "none"])
def test_columns_write_the_bytes_of_rows(tmp_path, rows):
    write_drops(tmp_path / "rows.parquet", rows)
    ids = pa.chunked_array([pa.array([r[0] for r in rows[:1]], pa.string()),
                            pa.array([r[0] for r in rows[1:]], pa.string())])   # in two chunks, as a take may give
    write_drop_columns(tmp_path / "columns.parquet", ids, pa.array([r[1] for r in rows], pa.string()),
                       pa.array([r[2] for r in rows], pa.string()))
    assert (tmp_path / "columns.parquet").read_bytes() == (tmp_path / "rows.parquet").read_bytes()
    assert read_drops(tmp_path / "columns.parquet") == {r[0]: (r[1], r[2] or "") for r in rows}


def test_one_reason_for_all(tmp_path):
    rows = [("a", "near_duplicate", "c1"), ("b", "near_duplicate", "c1")]
    write_drops(tmp_path / "rows.parquet", rows)
    write_drop_columns(tmp_path / "columns.parquet", pa.array(["a", "b"]), "near_duplicate", pa.array(["c1", "c1"]))
    assert (tmp_path / "columns.parquet").read_bytes() == (tmp_path / "rows.parquet").read_bytes()
