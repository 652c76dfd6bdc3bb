"""Write ledger tables as Parquet plus one `ledger.duckdb`, and query them.

Each table is `<out>/ledger/<table>.parquet` (sorted rows, fixed schema, so the same run
writes the same bytes) and the same data as a table in `ledger.duckdb`, plus views:
- `funnel`: per source, records read, kept and tokens,
- `drop_reasons`: drops and quarantines by source, step and reason in one list,
- `category_shares`: per stage and category, effective tokens and share against the target,
and the table `decisions`: one row per dropped or quarantined record (source, shard, id, step, outcome,
reason, detail: the kept copy, cluster or matched benchmark item), copied from `decisions/` into the file, so
a `ledger.duckdb` copied or mailed alone still answers "why did document X leave" (a view reading
`decisions/` would name this machine's absolute path: DuckDB resolves a view's relative path against the
reader's working directory, not the database file).

The file is written in DuckDB's storage format v1.1.0 (`STORAGE_FORMAT`): the oldest duckdb that
`pyproject.toml` allows (1.1) opens it, whichever newer duckdb wrote it (by default duckdb 1.2+ writes
its own newest format, which older readers refuse). Every table, view and column carries a `COMMENT ON`
(`curation.ledger.comments`), so `duckdb_columns()` explains the file without this repository.
"""
from __future__ import annotations

import os
from pathlib import Path

import pyarrow as pa

from curation.core.atomic import atomic_write_parquet
from curation.errors import CurateError
from curation.ledger.comments import comment_sql
from curation.ledger.schema import SCHEMAS
from curation.runtime.tasks import DECISIONS

# what `duckdb>=1.1` in pyproject.toml promises: files readable by duckdb 1.1.0 and newer
STORAGE_FORMAT = "v1.1.0"
DECISIONS_SCHEMA = pa.schema([("source", pa.string()), *DECISIONS])

VIEWS = {
    "funnel": """
        SELECT s.source, r.records_in AS records_read, t.documents AS documents_kept,
               round(100.0 * t.documents / nullif(r.records_in, 0), 2) AS kept_pct, t.total_tokens
        FROM sources s JOIN steps r ON r.source = s.source AND r.position = 0
        JOIN tokens t ON t.source = s.source AND t.pool = 'main' ORDER BY s.source""",
    "drop_reasons": """
        SELECT source, step, reason, records, 'dropped' AS kind FROM drops
        UNION ALL SELECT source, step, reason, records, 'quarantined' FROM quarantine
        ORDER BY source, records DESC, step, reason""",
    "category_shares": """
        SELECT stage, category, sum(effective_tokens) AS effective_tokens, sum(share) AS share,
               max(target_share) AS target_share
        FROM mixture GROUP BY stage, category ORDER BY stage, category""",
}


def write_ledger(rows: dict[str, list[dict]], ledger_dir: Path) -> Path:
    ledger_dir.mkdir(parents=True, exist_ok=True)
    for name, schema in SCHEMAS.items():
        data = rows.get(name, [])
        table = pa.Table.from_pylist(data, schema=schema)
        atomic_write_parquet(ledger_dir / f"{name}.parquet", table)
    db = ledger_dir / "ledger.duckdb"
    tmp = db.with_name("ledger.duckdb.tmp")
    tmp.unlink(missing_ok=True)
    con = open_new(tmp)
    try:
        for name in SCHEMAS:
            path = str(ledger_dir / f"{name}.parquet").replace("'", "''")
            con.execute(f"CREATE TABLE {name} AS SELECT * FROM read_parquet('{path}')")
        con.execute(f"CREATE TABLE decisions AS {decisions_select(ledger_dir)}")
        for name, sql in VIEWS.items():
            con.execute(f"CREATE VIEW {name} AS {sql}")
        comment_sql(con, "ledger")
    finally:
        con.close()
    os.replace(tmp, db)
    return db


def open_new(path: Path):
    """A connection whose default database is a new file at `path` in `STORAGE_FORMAT`."""
    import duckdb

    con = duckdb.connect()
    try:
        con.execute(f"ATTACH '{str(path).replace(chr(39), chr(39) * 2)}' AS ledger (STORAGE_VERSION '{STORAGE_FORMAT}')")
        con.execute("USE ledger")
    except BaseException:
        con.close()
        raise
    return con


def decisions_select(ledger_dir: Path) -> str:
    """The rows of the `decisions` table: every file of `decisions/` in a fixed order (source, file name,
    row within the file, so the same evidence gives the same rows wherever the folder is), or no rows."""
    decisions = Path(os.path.normpath(Path(ledger_dir).absolute())) / "decisions"
    cols = ", ".join(DECISIONS_SCHEMA.names)
    if any(decisions.glob("source=*/*.parquet")):
        glob = str(decisions / "source=*" / "*.parquet").replace("'", "''")
        return (f"SELECT {cols} FROM read_parquet('{glob}', hive_partitioning = true, hive_types_autocast = false, "
                f"filename = true, file_row_number = true) ORDER BY source, filename, file_row_number")
    return "SELECT " + ", ".join(f"NULL::VARCHAR AS {c}" for c in DECISIONS_SCHEMA.names) + " WHERE false"


def relink_decisions(ledger_dir: Path) -> None:
    """Bring an output folder's `ledger.duckdb` written before the decisions were stored in it (a `decisions`
    view reading `decisions/` by absolute path, which a copy or move breaks) to the stored table, read from
    this folder's `decisions/`; a current file is left as it is (its table moves with it)."""
    import duckdb

    con = duckdb.connect(str(ledger_dir / "ledger.duckdb"))
    try:
        is_view = con.execute("SELECT count(*) FROM duckdb_views() WHERE view_name = 'decisions' "
                              "AND NOT internal").fetchone()[0]
        if is_view:
            con.execute("DROP VIEW decisions")
            con.execute(f"CREATE TABLE decisions AS {decisions_select(ledger_dir)}")
            comment_sql(con)
    finally:
        con.close()


def query(ledger_dir: Path, sql: str):
    """Run read-only SQL against `ledger.duckdb`; returns (column names, rows)."""
    import duckdb

    db = ledger_dir / "ledger.duckdb"
    if not db.is_file():
        raise CurateError(f"{db} not found; is {ledger_dir.parent} the output folder of a `curate run`?")
    con = duckdb.connect(str(db), read_only=True)
    try:
        cur = con.execute(sql)
        return [d[0] for d in cur.description], cur.fetchall()
    except duckdb.Error as e:
        raise CurateError(f"ledger query failed: {e}") from None
    finally:
        con.close()


def read_rows(ledger_dir: Path) -> dict[str, list[dict]]:
    """All ledger tables of an output folder as lists of row dicts."""
    import pyarrow.parquet as pq

    if not (ledger_dir / "runs.parquet").is_file():
        raise CurateError(f"{ledger_dir} holds no ledger; run `curate run RECIPE --out {ledger_dir.parent}` first")
    return {name: pq.read_table(ledger_dir / f"{name}.parquet").to_pylist() for name in SCHEMAS}
