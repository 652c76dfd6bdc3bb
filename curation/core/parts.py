"""Rows that stay on disk: a table whose rows are in Parquet part files written by the tasks that made them.

A corpus-wide phase whose ledger table grows with the corpus (one row per near-duplicate cluster, per
removed document, ...) hands the ledger a `PartRows` instead of a list of row dicts: the part files, in
the table's row order, plus the columns every row shares (the run). The ledger copies them into its
Parquet file and `ledger.duckdb` with DuckDB (`curation.ledger.store`), so the driver never holds the rows;
code that reads the rows (the report, tests) iterates them, one record batch at a time.
"""
from __future__ import annotations

import os
import shutil
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

BATCH_ROWS = 8192   # rows per record batch while iterating: memory stays one batch, whatever the table's size
# What DuckDB may hold while a task sums part files (beyond it, the aggregation spills next to the target)
SUM_MEMORY = "256MB"


@dataclass(frozen=True, eq=False)
class PartRows:
    """The rows of `paths` (Parquet files, in this order, each in its own row order) with `constants` added to
    every row (column -> value; e.g. the run). Columns of a part file that the table does not name are ignored
    by the ledger (`columns`: the ones it takes, in the table's order, constants included)."""
    paths: tuple[Path, ...]
    columns: tuple[str, ...]
    constants: dict = field(default_factory=dict)

    def __post_init__(self):
        object.__setattr__(self, "paths", tuple(Path(p) for p in self.paths))
        object.__setattr__(self, "columns", tuple(self.columns))

    @property
    def read(self) -> list[str]:
        """The columns read from the part files."""
        return [c for c in self.columns if c not in self.constants]

    def __len__(self) -> int:
        import pyarrow.parquet as pq

        return sum(pq.read_metadata(p).num_rows for p in self.paths)

    def __bool__(self) -> bool:
        return len(self) > 0

    def __getitem__(self, index):
        """Row `index` (or a slice of rows), read from the parts: a look at a few rows (a test, the Python API's
        `result.rows[...]`), not a loop over many."""
        return list(self)[index]

    def __eq__(self, other) -> bool:
        """Equal to a list of row dicts (or another `PartRows`) holding the same rows in the same order, as the
        list of rows it stands for would be."""
        if isinstance(other, PartRows | list):
            return list(self) == list(other)
        return NotImplemented

    __hash__ = None   # type: ignore[assignment]   # compared by content, like the list it stands for

    def __iter__(self) -> Iterator[dict]:
        import pyarrow.parquet as pq

        for path in self.paths:
            for batch in pq.ParquetFile(path).iter_batches(batch_size=BATCH_ROWS, columns=self.read):
                for row in batch.to_pylist():
                    yield {c: self.constants[c] if c in self.constants else row[c] for c in self.columns}


def _sql_str(value) -> str:
    return "'" + str(value).replace("'", "''") + "'"


def sum_parts(paths: Sequence[Path], keys: Sequence[str], sums: Sequence[str], target: Path,
              constants: dict[str, str] | None = None) -> int:
    """Write to `target` (Parquet, atomically) the rows of the part files `paths` summed by `keys`, one row per
    distinct key, sorted by the keys (NULL first, then by code point), with the string `constants` as leading
    columns; returns the number of rows. DuckDB streams the parts and spills beyond `SUM_MEMORY`, so the
    task that sums holds neither the parts nor the result, however many distinct keys they hold. The sums are
    64-bit integers, as in the parts."""
    import duckdb
    import pyarrow as pa
    import pyarrow.parquet as pq

    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_name(target.name + ".tmp")
    head = [f"{_sql_str(v)} AS {c}" for c, v in (constants or {}).items()]
    if not paths:   # nothing to sum: an empty file with the columns' types
        fields = [(c, pa.string()) for c in (constants or {})] + [(k, pa.string()) for k in keys] + \
                 [(c, pa.int64()) for c in sums]
        pq.write_table(pa.Table.from_pylist([], schema=pa.schema(fields)), tmp, compression="zstd")
        os.replace(tmp, target)
        return 0
    spill = target.with_name(f".{target.name}.spill")
    files = ", ".join(_sql_str(p) for p in paths)
    cols = ", ".join([*head, *keys, *(f"sum({c})::BIGINT AS {c}" for c in sums)])
    order = ", ".join(f"{k} NULLS FIRST" for k in keys)
    con = duckdb.connect()
    try:
        con.execute(f"SET memory_limit = '{SUM_MEMORY}'")
        con.execute("SET threads = 1")
        con.execute("SET preserve_insertion_order = true")
        con.execute("SET enable_progress_bar = false")
        con.execute(f"SET temp_directory = {_sql_str(spill)}")
        con.execute(f"COPY (SELECT {cols} FROM read_parquet([{files}]) GROUP BY {', '.join(keys)} ORDER BY {order}) "
                    f"TO {_sql_str(tmp)} (FORMAT parquet, COMPRESSION zstd)")
    finally:
        con.close()
        shutil.rmtree(spill, ignore_errors=True)
    os.replace(tmp, target)
    return pq.read_metadata(target).num_rows
