"""The token ledger: per-source counts as Parquet tables and a DuckDB database."""
from curation.ledger.rows import build_rows
from curation.ledger.schema import SCHEMAS
from curation.ledger.store import query, read_rows, write_ledger

__all__ = ["SCHEMAS", "build_rows", "query", "read_rows", "write_ledger"]
