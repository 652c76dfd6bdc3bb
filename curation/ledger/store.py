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

A table that grows with the corpus (near-duplicate clusters, removed documents) comes as `PartRows`: the
Parquet files its task wrote. DuckDB copies those rows into `ledger.duckdb` and from there into the table's
Parquet file, in the parts' order, with its memory bounded (`DUCKDB_MEMORY`; sorts spill to disk), so the
driver holds none of them whatever the corpus size.

The file is written in DuckDB's storage format v1.1.0 (`STORAGE_FORMAT`): the oldest duckdb that
`pyproject.toml` allows (1.1) opens it, whichever newer duckdb wrote it (by default duckdb 1.2+ writes
its own newest format, which older readers refuse). Every table, view and column carries a `COMMENT ON`
(`curation.ledger.comments`), so `duckdb_columns()` explains the file without this repository.
"""
from __future__ import annotations

import os
import shutil
from pathlib import Path

import pyarrow as pa

from curation.core.atomic import atomic_write_parquet
from curation.core.parts import PartRows
from curation.errors import CurateError
from curation.ledger.comments import comment_sql
from curation.ledger.schema import SCHEMAS
from curation.runtime.tasks import DECISIONS

# what `duckdb>=1.1` in pyproject.toml promises: files readable by duckdb 1.1.0 and newer
STORAGE_FORMAT = "v1.1.0"
# What DuckDB may hold while it writes the ledger (the driver's process: tables copied from part files grow
# with the corpus, so their sorts spill to disk beyond this) and the threads it uses.
DUCKDB_MEMORY = "256MB"
DUCKDB_THREADS = 2
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


def write_ledger(rows: dict[str, list[dict] | PartRows], ledger_dir: Path) -> Path:
    """Every table as `<name>.parquet` and in `ledger.duckdb`. A table given as `PartRows` (rows in the part
    files of the tasks that wrote them) is copied by DuckDB from those files, in their order, into the
    database and from there into its Parquet file: its rows never pass through this process, and DuckDB
    holds at most `DUCKDB_MEMORY` (`settings`), spilling beyond."""
    ledger_dir.mkdir(parents=True, exist_ok=True)
    parts = {name: data for name, data in rows.items() if isinstance(data, PartRows)}
    for name, schema in SCHEMAS.items():
        # a part table's file starts empty: its types are the schema's, for the table DuckDB fills below
        table = pa.Table.from_pylist([] if name in parts else rows.get(name, []), schema=schema)
        atomic_write_parquet(ledger_dir / f"{name}.parquet", table)
    db = ledger_dir / "ledger.duckdb"
    tmp = db.with_name("ledger.duckdb.tmp")
    tmp.unlink(missing_ok=True)
    spill = ledger_dir / ".duckdb-spill"
    con = open_new(tmp, spill=spill)
    try:
        for name in SCHEMAS:
            path = ledger_dir / f"{name}.parquet"
            con.execute(f"CREATE TABLE {name} AS SELECT * FROM read_parquet({_sql_str(path)})")
            if name in parts:
                con.execute(f"INSERT INTO {name} {parts_select(parts[name])}")
                copied, listed = con.execute(f"SELECT count(*) FROM {name}").fetchone()[0], len(parts[name])
                if copied != listed:   # every part's rows, none lost to a path DuckDB spells another way
                    raise CurateError(f"ledger table {name}: copied {copied} rows from {len(parts[name].paths)} "
                                      f"part file(s) holding {listed}; re-run `curate run` to rewrite the ledger")
                written = path.with_name(path.name + ".tmp")
                con.execute(f"COPY {name} TO {_sql_str(written)} (FORMAT parquet, COMPRESSION zstd)")
                os.replace(written, path)
        con.execute(f"CREATE TABLE decisions AS {decisions_select(ledger_dir)}")
        for name, sql in VIEWS.items():
            con.execute(f"CREATE VIEW {name} AS {sql}")
        comment_sql(con, "ledger")
    finally:
        con.close()
        shutil.rmtree(spill, ignore_errors=True)
    os.replace(tmp, db)
    return db


def _sql_str(value) -> str:
    return "'" + str(value).replace("'", "''") + "'"


def parts_select(part: PartRows) -> str:
    """The rows of `part` as a SELECT in the table's column order: part files in their given order, rows in
    file order (`file_row_number`), the constants as literals. DuckDB casts to the table's column types."""
    if not part.paths:
        return "SELECT " + ", ".join(f"NULL AS {c}" for c in part.columns) + " WHERE false"
    files = ", ".join(_sql_str(p) for p in part.paths)
    order = ", ".join(f"({_sql_str(p)}, {i})" for i, p in enumerate(part.paths))
    cols = ", ".join(_sql_str(part.constants[c]) + f" AS {c}" if c in part.constants else f"p.{c}"
                     for c in part.columns)
    return (f"SELECT {cols} FROM read_parquet([{files}], filename = true, file_row_number = true) p "
            f"JOIN (VALUES {order}) o(file, pos) ON p.filename = o.file ORDER BY o.pos, p.file_row_number")


def bounded(con, spill: Path | None, memory: str | None = None, threads: int | None = None):
    """`con` with DuckDB's memory and threads bounded (beyond `memory`, sorts, copies and in-memory tables
    spill to `spill`), rows kept in insertion order and no progress bar; returns it. Unset, the bounds are
    `DUCKDB_MEMORY` and `DUCKDB_THREADS` as they are at the call (a caller that lowers them is obeyed)."""
    try:
        con.execute(f"SET memory_limit = '{memory or DUCKDB_MEMORY}'")
        con.execute(f"SET threads = {threads or DUCKDB_THREADS}")
        con.execute("SET preserve_insertion_order = true")   # tables and copies keep the rows' order
        con.execute("SET enable_progress_bar = false")        # a long copy prints nothing on the run's terminal
        if spill is not None:
            con.execute(f"SET temp_directory = {_sql_str(spill)}")
    except BaseException:
        con.close()
        raise
    return con


def open_new(path: Path, spill: Path | None = None):
    """A connection whose default database is a new file at `path` in `STORAGE_FORMAT`, with DuckDB's memory
    bounded (`DUCKDB_MEMORY`, `DUCKDB_THREADS`; beyond it, sorts and copies spill to `spill`)."""
    import duckdb

    con = bounded(duckdb.connect(), spill)
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
