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


def token_balance(out: Path) -> tuple[int, int, list[tuple[str, str, int]]]:
    """(the ledger's `tokens` total, the tokens of every merged `.idx` under `tokenized/`, the ledger's
    (source, pool, tokens) rows): a run's ledger balances when the first two are equal and there is one
    row per merged shard set."""
    import duckdb

    from curation.shards import read_index

    con = duckdb.connect(str(out / "ledger" / "ledger.duckdb"), read_only=True)
    try:
        pools = [tuple(r) for r in con.sql("SELECT source, pool, total_tokens FROM tokens ORDER BY ALL").fetchall()]
    finally:
        con.close()
    shards = sum(int(read_index(p)[1].sum()) for p in sorted(out.glob("tokenized/*/*.idx")))
    return sum(t for _, _, t in pools), shards, pools
