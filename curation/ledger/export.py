"""Ledger interchange: any table, view or query of a run's ledger as CSV, JSON or Parquet.

- A table is read from its Parquet file (`ledger/<table>.parquet`: the verified data, with its
  types); a view or `sql` runs on `ledger.duckdb` (read-only).
- CSV: a header row, then one line per row; nulls are empty fields; list and struct values (e.g.
  `clusters.members`) are written as JSON text, since CSV has no nesting.
- JSON: an array of row objects, one row per line; exact integers (DuckDB's sums are decimals) stay
  integers; NaN and infinities become null, which JSON requires.
- Parquet: the Arrow table as read, types kept.
"""
from __future__ import annotations

import io
import json
import math
from datetime import date, datetime
from decimal import Decimal
from pathlib import Path

import pyarrow as pa

from curation.core.atomic import atomic_write_bytes
from curation.errors import CurateError
from curation.ledger.schema import SCHEMAS
from curation.ledger.store import VIEWS

FORMATS = ("csv", "json", "parquet")
SUFFIX = {"csv": ".csv", "json": ".json", "parquet": ".parquet"}


def _arrow(relation) -> pa.Table:
    """A DuckDB relation as Arrow (`to_arrow_table` in duckdb 2, `fetch_arrow_table` in 1.x)."""
    for name in ("to_arrow_table", "fetch_arrow_table", "arrow"):
        fn = getattr(relation, name, None)
        if fn is not None:
            return fn()
    raise CurateError("this duckdb cannot return Arrow tables; install duckdb >= 1.1")


def select(ledger_dir: Path, *, table: str | None = None, sql: str | None = None) -> pa.Table:
    """One table (`table`: a ledger table or view) or a query's result (`sql`, DuckDB dialect)."""
    import duckdb
    import pyarrow.parquet as pq

    if table is not None and table in SCHEMAS:
        path = ledger_dir / f"{table}.parquet"
        if not path.is_file():
            raise CurateError(f"{path} not found; is {ledger_dir.parent} the output folder of a `curate run`?")
        return pq.read_table(path)
    if table is not None and table not in VIEWS:
        raise CurateError(f"unknown ledger table {table!r}; tables: {', '.join(SCHEMAS)}; views: {', '.join(VIEWS)}")
    query = sql if sql is not None else f'SELECT * FROM "{table}"'
    db = ledger_dir / "ledger.duckdb"
    if not db.is_file():
        raise CurateError(f"{db} not found; is {ledger_dir.parent} the output folder of a `curate run`?")
    con = duckdb.connect(str(db), read_only=True)
    try:
        return _arrow(con.sql(query))
    except duckdb.Error as e:
        raise CurateError(f"ledger query failed: {e}") from None
    finally:
        con.close()


def _plain(value):
    """A JSON-ready value: decimals as exact ints where integral, times as ISO text, NaN as null."""
    if isinstance(value, Decimal):
        return int(value) if value == value.to_integral_value() else float(value)
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, (datetime, date)):
        return value.isoformat()
    if isinstance(value, bytes):
        return value.hex()
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return value


def _json_lines(table: pa.Table) -> str:
    rows = [json.dumps(_plain(r), ensure_ascii=False, allow_nan=False) for r in table.to_pylist()]
    return "[\n" + ",\n".join(rows) + ("\n" if rows else "") + "]\n"


def _flat(table: pa.Table) -> pa.Table:
    """Nested columns as JSON text, for CSV."""
    for i, field in enumerate(table.schema):
        if pa.types.is_nested(field.type):
            text = [None if v is None else json.dumps(_plain(v), ensure_ascii=False, allow_nan=False)
                    for v in table.column(i).to_pylist()]
            table = table.set_column(i, pa.field(field.name, pa.string()), pa.array(text, pa.string()))
    return table


def encode(table: pa.Table, fmt: str) -> bytes:
    """`table` in `fmt` (one of `FORMATS`)."""
    if fmt == "json":
        return _json_lines(table).encode()
    buf = io.BytesIO()
    if fmt == "csv":
        import pyarrow.csv as pacsv
        pacsv.write_csv(_flat(table), buf)
    elif fmt == "parquet":
        import pyarrow.parquet as pq
        pq.write_table(table, buf)
    else:
        raise CurateError(f"unknown format {fmt!r}; one of {', '.join(FORMATS)}")
    return buf.getvalue()


def export_all(ledger_dir: Path, fmt: str, folder: Path) -> list[Path]:
    """Every ledger table as `folder/<table>.<fmt>`; returns the files written."""
    folder.mkdir(parents=True, exist_ok=True)
    written = []
    for name in SCHEMAS:
        path = folder / f"{name}{SUFFIX[fmt]}"
        atomic_write_bytes(path, encode(select(ledger_dir, table=name), fmt))
        written.append(path)
    return written
