"""Write ledger tables as Parquet plus one `ledger.duckdb`, and query them.

Each table is `<out>/ledger/<table>.parquet` (sorted rows, fixed schema, so the same run
writes the same bytes) and the same data as a table in `ledger.duckdb`, plus views:
- `funnel`: per source, records read, kept and tokens,
- `drop_reasons`: drops and quarantines by source, step and reason in one list,
- `category_shares`: per stage and category, effective tokens and share against the target.
"""
from __future__ import annotations

import os
from pathlib import Path

import pyarrow as pa

from curation.core.atomic import atomic_write_parquet
from curation.errors import CurateError

SCHEMAS: dict[str, pa.Schema] = {
    "runs": pa.schema([("run", pa.string()), ("recipe", pa.string()), ("vocabulary", pa.string()),
                       ("vocabulary_sha256", pa.string()), ("curate_version", pa.string()),
                       ("stages", pa.string())]),
    "sources": pa.schema([("run", pa.string()), ("source", pa.string()), ("source_fingerprint", pa.string()),
                          ("modality", pa.string()), ("category", pa.string()), ("revision", pa.string()),
                          ("license", pa.string()), ("license_class", pa.string()), ("weight", pa.float64()),
                          ("included", pa.bool_()), ("excluded_reason", pa.string()),
                          ("input_files", pa.int64()), ("input_bytes", pa.int64()),
                          ("licence_decision", pa.string()), ("optout_mode", pa.string()), ("pii", pa.string()),
                          ("acquired", pa.string()), ("fetched_sha256", pa.string())]),
    "acquisition": pa.schema([("run", pa.string()), ("source", pa.string()), ("kind", pa.string()),
                              ("origin", pa.string()), ("outcome", pa.string()), ("reason", pa.string()),
                              ("items", pa.int64())]),
    "inputs": pa.schema([("run", pa.string()), ("source", pa.string()), ("shard", pa.string()),
                         ("path", pa.string()), ("bytes", pa.int64()), ("sha256", pa.string())]),
    "steps": pa.schema([("run", pa.string()), ("source", pa.string()), ("position", pa.int32()),
                        ("step", pa.string()), ("records_in", pa.int64()), ("records_out", pa.int64()),
                        ("dropped", pa.int64()), ("quarantined", pa.int64()), ("seconds", pa.float64())]),
    "drops": pa.schema([("run", pa.string()), ("source", pa.string()), ("step", pa.string()),
                        ("reason", pa.string()), ("records", pa.int64())]),
    "quarantine": pa.schema([("run", pa.string()), ("source", pa.string()), ("step", pa.string()),
                             ("reason", pa.string()), ("records", pa.int64())]),
    "tokens": pa.schema([("run", pa.string()), ("source", pa.string()), ("documents", pa.int64()),
                         ("text_tokens", pa.int64()), ("image_tokens", pa.int64()),
                         ("audio_tokens", pa.int64()), ("total_tokens", pa.int64())]),
    "stages": pa.schema([("run", pa.string()), ("stage", pa.string()), ("seq_length", pa.int64()),
                         ("budget_tokens", pa.int64())]),
    "mixture": pa.schema([("run", pa.string()), ("stage", pa.string()), ("source", pa.string()),
                          ("category", pa.string()), ("raw_tokens", pa.int64()), ("documents", pa.int64()),
                          ("epochs", pa.float64()), ("effective_tokens", pa.int64()), ("share", pa.float64()),
                          ("target_share", pa.float64()), ("max_epochs", pa.float64()),
                          ("exhausted_at_tokens", pa.int64()), ("excluded", pa.string())]),
    "mixture_flags": pa.schema([("run", pa.string()), ("stage", pa.string()), ("source", pa.string()),
                                ("kind", pa.string()), ("message", pa.string())]),
    "buckets": pa.schema([("run", pa.string()), ("stage", pa.string()), ("bucket", pa.int32()),
                          ("lower", pa.int64()), ("upper", pa.int64()), ("target_tokens", pa.int64()),
                          ("filled_tokens", pa.int64()), ("topup_tokens", pa.int64()),
                          ("realised_tokens", pa.int64()), ("documents", pa.int64()), ("sources", pa.string())]),
    "clusters": pa.schema([("run", pa.string()), ("cluster", pa.string()), ("kept_source", pa.string()),
                           ("kept_id", pa.string()), ("size", pa.int64()), ("members", pa.list_(pa.string())),
                           ("sources", pa.list_(pa.string()))]),
    "pii": pa.schema([("run", pa.string()), ("source", pa.string()), ("kind", pa.string()),
                      ("replaced", pa.int64())]),
    "optout": pa.schema([("run", pa.string()), ("source", pa.string()), ("mode", pa.string()),
                         ("records", pa.int64()), ("with_url", pa.int64()), ("removed", pa.int64()),
                         ("allowlist_would_remove", pa.int64())]),
    "image_clusters": pa.schema([("run", pa.string()), ("cluster", pa.string()), ("domain", pa.string()),
                                 ("kept_source", pa.string()), ("kept_id", pa.string()), ("size", pa.int64()),
                                 ("members", pa.list_(pa.string())), ("sources", pa.list_(pa.string()))]),
    "near_duplicates": pa.schema([("run", pa.string()), ("source", pa.string()), ("id", pa.string()),
                                  ("cluster", pa.string())]),
    # Filled by later stages of the build-out; present (empty) so that queries and reports can rely on them.
    "decontamination": pa.schema([("run", pa.string()), ("source", pa.string()), ("benchmark", pa.string()),
                                  ("original", pa.int64()), ("flagged", pa.int64()), ("readmitted", pa.int64()),
                                  ("removed", pa.int64()), ("final", pa.int64()), ("pct_removed", pa.float64())]),
    "images": pa.schema([("run", pa.string()), ("source", pa.string()), ("category", pa.string()),
                         ("domain", pa.string()), ("samples", pa.int64()), ("image_tokens", pa.int64()),
                         ("paired_text_tokens", pa.int64()), ("caption", pa.string()), ("area", pa.int64()),
                         ("batches", pa.int64())]),
    "audio": pa.schema([("run", pa.string()), ("source", pa.string()), ("category", pa.string()),
                        ("clips", pa.int64()), ("hours", pa.float64()), ("audio_codes", pa.int64()),
                        ("audio_tokens", pa.int64()), ("paired_text_tokens", pa.int64()),
                        ("interleaved", pa.int64()), ("transcription", pa.int64()), ("audio_only", pa.int64()),
                        ("stage2_pool", pa.int64()), ("long_context_pool", pa.int64()), ("batches", pa.int64()),
                        ("padding_pct", pa.float64())]),
    "audio_clusters": pa.schema([("run", pa.string()), ("cluster", pa.string()), ("kind", pa.string()),
                                 ("kept_source", pa.string()), ("kept_id", pa.string()), ("size", pa.int64()),
                                 ("members", pa.list_(pa.string())), ("sources", pa.list_(pa.string())),
                                 ("max_ber", pa.float64())]),
    "benchmarks": pa.schema([("run", pa.string()), ("benchmark", pa.string()), ("sha256", pa.string()),
                             ("fields", pa.string()), ("items", pa.int64()), ("unindexable", pa.int64())]),
    # written back by `curate train` (curation.train.writeback): what a training run actually consumed
    "consumed": pa.schema([("run", pa.string()), ("stage", pa.string()), ("source", pa.string()),
                           ("training", pa.string()), ("steps", pa.int64()),
                           ("text_tokens", pa.int64()), ("image_tokens", pa.int64()),
                           ("audio_tokens", pa.int64()), ("other_tokens", pa.int64()), ("total_tokens", pa.int64()),
                           ("repeat_tokens", pa.int64()), ("documents", pa.int64()),
                           ("planned_tokens", pa.int64())]),
}

VIEWS = {
    "funnel": """
        SELECT s.source, r.records_in AS records_read, t.documents AS documents_kept,
               round(100.0 * t.documents / nullif(r.records_in, 0), 2) AS kept_pct, t.total_tokens
        FROM sources s JOIN steps r ON r.source = s.source AND r.position = 0
        JOIN tokens t ON t.source = s.source ORDER BY s.source""",
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
    finally:
        con.close()
    os.replace(tmp, db)
    return db


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
