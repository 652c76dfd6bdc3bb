"""The token ledger: per-source counts as Parquet tables and a DuckDB database."""
from curation.ledger.store import SCHEMAS, query, read_rows, write_ledger
from curation.ledger.tables import build_rows
from curation.shards.counting import count_tokens_by_modality

__all__ = ["SCHEMAS", "build_rows", "count_tokens_by_modality", "query", "read_rows", "write_ledger"]
