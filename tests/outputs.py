"""Reading a run's outputs back for byte-identity comparisons."""
from pathlib import Path

import pyarrow.parquet as pq

from curation.ledger.schema import EXECUTION_TABLES, VOLATILE_COLUMNS


def _files(out: Path, *globs: str) -> dict[str, bytes]:
    return {str(p.relative_to(out)): p.read_bytes() for g in globs for p in sorted(out.glob(g))}


def _ledger_rows(out: Path) -> dict[str, list[dict]]:
    """Every ledger table's rows without the volatile columns (timings, run times, host, versions) and
    without the tables of the execution (task retries)."""
    rows = {}
    for p in sorted((out / "ledger").glob("*.parquet")):
        if p.stem in EXECUTION_TABLES:
            continue
        table = pq.read_table(p).to_pylist()
        rows[p.stem] = [{k: v for k, v in r.items() if k not in VOLATILE_COLUMNS} for r in table]
    return rows
