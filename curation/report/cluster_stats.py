"""The report's near-duplicate cluster statistics, computed by DuckDB over the ledger's `clusters` rows: the
table may stay in the clusters task's part files (`PartRows`; a row per cluster, so it grows with the corpus),
and the driver then holds none of its rows, only the counts (`curation.report.sections.dedup_sections`)."""
from __future__ import annotations

import tempfile
from pathlib import Path

import pyarrow as pa

from curation.core.parts import PartRows
from curation.ledger.schema import SCHEMAS
from curation.ledger.store import bounded, parts_select

MEMORY = "64MB"   # DuckDB's limit for these counts (beyond it, the self-join spills): the report's own peak stays put


def cluster_stats(clusters) -> tuple[int, dict[int, int], list[str], dict[tuple[str, str], int]]:
    """(clusters, clusters per size, every source a cluster names, clusters per ordered pair of sources
    among each cluster's `sources`, a source with itself included) of a `PartRows` or a list of rows."""
    import duckdb

    with tempfile.TemporaryDirectory(prefix="curate-clusters-") as spill:
        con = bounded(duckdb.connect(), Path(spill), MEMORY, threads=1)
        try:
            if isinstance(clusters, PartRows):
                con.execute(f"CREATE VIEW c AS {parts_select(clusters)}")
            else:
                con.register("c", pa.Table.from_pylist(list(clusters), schema=SCHEMAS["clusters"]))
            n = con.execute("SELECT count(*) FROM c").fetchone()[0]
            sizes = dict(con.execute("SELECT size, count(*) FROM c GROUP BY size").fetchall())
            names = [r[0] for r in con.execute("SELECT DISTINCT unnest(sources) AS s FROM c ORDER BY s").fetchall()]
            pairs = con.execute("""WITH m AS (SELECT k, unnest(sources) AS s
                                              FROM (SELECT row_number() OVER () AS k, sources FROM c))
                                   SELECT a.s, b.s, count(*) FROM m a JOIN m b ON a.k = b.k GROUP BY a.s, b.s""").fetchall()
        finally:
            con.close()
    return int(n), {int(k): int(v) for k, v in sizes.items()}, names, {(a, b): int(v) for a, b, v in pairs}
