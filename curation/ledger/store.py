"""Write ledger tables as Parquet plus one `ledger.duckdb`, and query them.

Each table is `<out>/ledger/<table>.parquet` (sorted rows, fixed schema, so the same run
writes the same bytes) and the same data as a table in `ledger.duckdb`, plus views:
- `funnel`: per source, records read, kept and tokens,
- `drop_reasons`: drops and quarantines by source, step and reason in one list,
- `category_shares`: per stage and category, effective tokens and share against the target,
- `decisions`: one row per dropped or quarantined record (source, shard, id, step, outcome, reason,
  detail: the kept copy, cluster or matched benchmark item), read in place from `decisions/`.
"""
from __future__ import annotations

import os
from pathlib import Path

import pyarrow as pa

from curation.core.atomic import atomic_write_parquet
from curation.errors import CurateError
from curation.ledger.schema import SCHEMAS

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
    import duckdb

    ledger_dir.mkdir(parents=True, exist_ok=True)
    for name, schema in SCHEMAS.items():
        data = rows.get(name, [])
        table = pa.Table.from_pylist(data, schema=schema)
        atomic_write_parquet(ledger_dir / f"{name}.parquet", table)
    db = ledger_dir / "ledger.duckdb"
    tmp = db.with_name("ledger.duckdb.tmp")
    tmp.unlink(missing_ok=True)
    con = duckdb.connect(str(tmp))
    try:
        for name in SCHEMAS:
            path = str(ledger_dir / f"{name}.parquet").replace("'", "''")
            con.execute(f"CREATE TABLE {name} AS SELECT * FROM read_parquet('{path}')")
        for name, sql in VIEWS.items():
            con.execute(f"CREATE VIEW {name} AS {sql}")
        con.execute(f"CREATE VIEW decisions AS {decisions_view(ledger_dir)}")
    finally:
        con.close()
    os.replace(tmp, db)
    return db


def decisions_view(ledger_dir: Path) -> str:
    """The SQL of the `decisions` view: the per-record evidence in `decisions/`, read in place (not copied
    into the DuckDB file; it holds a row per removed record), or an empty relation of its columns."""
    decisions = Path(os.path.normpath(Path(ledger_dir).absolute())) / "decisions"
    if any(decisions.glob("source=*/*.parquet")):
        glob = str(decisions / "source=*" / "*.parquet").replace("'", "''")
        return f"SELECT * FROM read_parquet('{glob}', hive_partitioning = true)"
    return ("SELECT NULL::VARCHAR AS source, NULL::VARCHAR AS shard, NULL::VARCHAR AS id, NULL::VARCHAR AS step, "
            "NULL::VARCHAR AS outcome, NULL::VARCHAR AS reason, NULL::VARCHAR AS detail WHERE false")


def relink_decisions(ledger_dir: Path) -> None:
    """Point `ledger.duckdb`'s `decisions` view at this folder's `decisions/` (after the output folder
    was copied or moved: the view reads its files by absolute path)."""
    import duckdb

    con = duckdb.connect(str(ledger_dir / "ledger.duckdb"))
    try:
        con.execute(f"CREATE OR REPLACE VIEW decisions AS {decisions_view(ledger_dir)}")
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
