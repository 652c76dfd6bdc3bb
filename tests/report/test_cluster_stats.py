"""The report's near-duplicate cluster counts come from DuckDB over the `clusters` rows (part files or a list):
the same counts as a loop over the rows, which the driver no longer runs (it grew with the corpus)."""
from __future__ import annotations

import random

import pyarrow as pa
import pyarrow.parquet as pq

from curation.core.parts import PartRows
from curation.ledger.schema import SCHEMAS
from curation.report.cluster_stats import cluster_stats


def _rows(n: int) -> list[dict]:
    rng = random.Random(n)
    names = ["web", "news", "index:old"]
    return [{"run": "r", "cluster": f"web/{i}", "kept_source": "web", "kept_id": str(i), "size": rng.randint(2, 6),
             "members": [f"m{i}"], "sources": sorted(rng.sample(names, rng.randint(1, 3)))} for i in range(n)]


def _loop(rows: list[dict]):
    sizes, pairs = {}, {}
    for c in rows:
        sizes[c["size"]] = sizes.get(c["size"], 0) + 1
        for a in c["sources"]:
            for b in c["sources"]:
                pairs[(a, b)] = pairs.get((a, b), 0) + 1
    return len(rows), sizes, sorted({s for c in rows for s in c["sources"]}), pairs


def test_counts_from_part_files_and_from_rows_are_the_loops(tmp_path):
    rows = _rows(5000)
    columns = SCHEMAS["clusters"].names
    halves = [tmp_path / "a.parquet", tmp_path / "b.parquet"]
    for path, part in zip(halves, (rows[:3000], rows[3000:])):
        pq.write_table(pa.Table.from_pylist([{k: v for k, v in r.items() if k != "run"} for r in part]), path)
    assert cluster_stats(PartRows(halves, columns, {"run": "r"})) == _loop(rows)
    assert cluster_stats(rows) == _loop(rows)
    assert cluster_stats([]) == (0, {}, [], {})
