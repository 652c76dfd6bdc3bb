"""`sum_parts`: rows of several part files summed by key in DuckDB, as a task sums what its deps counted (a
source's documents and tokens per web domain), without holding the parts or the result in Python."""
from __future__ import annotations

import random

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from curation.core import parts
from curation.core.parts import sum_parts

SCHEMA = pa.schema([("web_domain", pa.string()), ("documents", pa.int64()), ("tokens", pa.int64())])


def _part(path, counts: dict) -> None:
    keys = sorted(counts, key=lambda k: (k is not None, k or ""))
    pq.write_table(pa.table({"web_domain": keys, "documents": [counts[k][0] for k in keys],
                             "tokens": [counts[k][1] for k in keys]}, schema=SCHEMA), path)


def _expected(counts: list[dict]) -> list[dict]:
    total: dict = {}
    for c in counts:
        for k, (d, t) in c.items():
            acc = total.setdefault(k or "", [0, 0])
            acc[0] += d
            acc[1] += t
    return [{"source": "web", "web_domain": k or None, "documents": d, "tokens": t}
            for k, (d, t) in sorted(total.items())]   # Python's order: "" (no domain) first, then by code point


def test_parts_are_summed_by_key_in_code_point_order_with_null_first(tmp_path):
    rng = random.Random(7)
    names = [None, "a.example", "B.example", "zz.test", "bücher.test", "ä.test", "例え.jp", "a.example.co.uk", "_x"]
    counts = [{k: (rng.randrange(1, 9), rng.randrange(1, 999)) for k in rng.sample(names, rng.randrange(1, 7))}
              for _ in range(6)]
    paths = []
    for i, c in enumerate(counts):
        paths.append(tmp_path / f"{i}.parquet")
        _part(paths[-1], c)
    target = tmp_path / "out" / "web.parquet"
    n = sum_parts(paths, ("web_domain",), ("documents", "tokens"), target, {"source": "web"})
    table = pq.read_table(target)
    assert table.to_pylist() == _expected(counts) and n == table.num_rows
    assert table.schema.field("documents").type == pa.int64()   # not DuckDB's 128-bit sum
    assert [p.name for p in target.parent.iterdir()] == ["web.parquet"]   # no spill or temporary file left


def test_no_parts_write_an_empty_file_with_the_columns(tmp_path):
    target = tmp_path / "web.parquet"
    assert sum_parts([], ("web_domain",), ("documents", "tokens"), target, {"source": "web"}) == 0
    table = pq.read_table(target)
    assert table.num_rows == 0 and table.column_names == ["source", "web_domain", "documents", "tokens"]


@pytest.mark.slow
def test_more_keys_than_duckdbs_memory_spill_and_stay_exact(tmp_path, monkeypatch):
    """Many distinct keys (a corpus of millions of domains) under a small memory limit: DuckDB spills, the
    sums and the order are still exact."""
    monkeypatch.setattr(parts, "SUM_MEMORY", "32MB")
    counts = [{f"d{(i * 7919 + j) % 400_000:06d}.example": (1, j % 13) for j in range(100_000)} for i in range(4)]
    paths = []
    for i, c in enumerate(counts):
        paths.append(tmp_path / f"{i}.parquet")
        _part(paths[-1], c)
    target = tmp_path / "web.parquet"
    sum_parts(paths, ("web_domain",), ("documents", "tokens"), target, {"source": "web"})
    assert pq.read_table(target).to_pylist() == _expected(counts)
