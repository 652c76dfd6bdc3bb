"""The named ledger queries of the EU AI Act public summary (`curation.report.ai_act`): each number in the
summary is a cell of one of these, run over the ledger tables; the summary's appendix prints them, and
`curate ledger OUT --sql` runs them against `ledger/ledger.duckdb` (substitute `$origin` by hand).
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa

from curation.core.parts import PartRows
from curation.ledger.schema import SCHEMAS
from curation.ledger.store import bounded, parts_select

# the template's share of domain names to list for crawled data: the top 10% by size of content (small
# and medium enterprises may list 5% or at most 1,000); at least one domain where any exists
TOP_DOMAIN_SHARE = 0.10

_INCLUDED = "coalesce(s.included, true)"   # a source the planner excluded is not training data

QUERIES: dict[str, str] = {
    "declarations": "SELECT field, value FROM transparency ORDER BY field",
    "text_tokens": f"""SELECT coalesce(sum(t.text_tokens), 0) AS text_tokens FROM tokens t
        JOIN sources s ON s.run = t.run AND s.source = t.source WHERE t.pool = 'main' AND {_INCLUDED}""",
    "images": f"""SELECT (SELECT coalesce(sum(i.samples), 0) FROM images i JOIN sources s ON s.run = i.run
            AND s.source = i.source WHERE {_INCLUDED})
        + (SELECT coalesce(sum(i.images), 0) FROM interleaved i JOIN sources s ON s.run = i.run
            AND s.source = i.source WHERE {_INCLUDED}) AS images""",
    "audio_hours": f"""SELECT coalesce(sum(a.hours), 0) AS hours FROM audio a
        JOIN sources s ON s.run = a.run AND s.source = a.source WHERE {_INCLUDED}""",
    "modalities": f"""SELECT s.modality, count(*) AS sources, coalesce(sum(t.documents), 0) AS documents,
            coalesce(sum(t.text_tokens), 0) AS text_tokens, coalesce(sum(t.image_tokens), 0) AS image_tokens,
            coalesce(sum(t.audio_tokens), 0) AS audio_tokens, coalesce(sum(t.total_tokens), 0) AS total_tokens
        FROM sources s LEFT JOIN tokens t ON t.run = s.run AND t.source = s.source AND t.pool = 'main'
        WHERE {_INCLUDED} GROUP BY s.modality ORDER BY s.modality""",
    "stage_tokens": """SELECT m.stage, sum(m.effective_tokens) AS effective_tokens FROM mixture m
        JOIN stages st ON st.run = m.run AND st.stage = m.stage GROUP BY m.stage, st.rowid ORDER BY st.rowid""",
    "sources_by_origin": f"""SELECT o.origin, s.source, s.modality, s.category, s.licence,
            coalesce(t.documents, 0) AS documents, coalesce(t.total_tokens, 0) AS tokens, o.basis
        FROM sources s JOIN source_origins o ON o.run = s.run AND o.source = s.source
        LEFT JOIN tokens t ON t.run = s.run AND t.source = s.source AND t.pool = 'main'
        WHERE o.origin = $origin AND {_INCLUDED} ORDER BY s.source""",
    # the top domains of one origin's sources by tokens in their main shards; share: of all that origin's
    # tokens (documents without a page URL included in the total)
    "top_domains": f"""WITH d AS (
            SELECT d.web_domain, sum(d.documents) AS documents, sum(d.tokens) AS tokens FROM domain_tokens d
            JOIN source_origins o ON o.run = d.run AND o.source = d.source
            JOIN sources s ON s.run = d.run AND s.source = d.source
            WHERE o.origin = $origin AND {_INCLUDED} GROUP BY d.web_domain),
        named AS (SELECT * FROM d WHERE web_domain IS NOT NULL),
        ranked AS (SELECT *, row_number() OVER (ORDER BY tokens DESC, web_domain) AS rank FROM named)
        SELECT rank, web_domain, documents, tokens,
               round(100.0 * tokens / nullif((SELECT sum(tokens) FROM d), 0), 2) AS share_pct,
               (SELECT count(*) FROM named) AS domains
        FROM ranked WHERE rank <= greatest(1, ceil({TOP_DOMAIN_SHARE} * (SELECT count(*) FROM named)))
        ORDER BY rank""",
    "no_url_tokens": f"""SELECT coalesce(sum(d.documents), 0) AS documents, coalesce(sum(d.tokens), 0) AS tokens
        FROM domain_tokens d JOIN source_origins o ON o.run = d.run AND o.source = d.source
        JOIN sources s ON s.run = d.run AND s.source = d.source
        WHERE o.origin = $origin AND d.web_domain IS NULL AND {_INCLUDED}""",
    "robots_snapshots": "SELECT snapshot, domains FROM robots_snapshots ORDER BY snapshot",
    "optout": """SELECT s.source, s.optout_mode, o.records, o.with_url, o.removed FROM sources s
        LEFT JOIN optout o ON o.run = s.run AND o.source = s.source ORDER BY s.source""",
    "licences": """SELECT s.source, s.licence, s.licence_class, s.licence_decision, s.included,
            coalesce((SELECT sum(d.records) FROM drops d WHERE d.run = s.run AND d.source = s.source
                      AND d.step = 'licence'), 0) AS records_removed
        FROM sources s ORDER BY s.source""",
    "pii": "SELECT source, kind, replaced FROM pii ORDER BY source, kind",
    "toxicity": """SELECT source, sum(scored) AS scored, sum(toxic) AS removed FROM toxicity
        GROUP BY source ORDER BY source""",
    "network_feeds": "SELECT feed, format, hosts, url_prefixes FROM feeds ORDER BY feed",
    "benchmarks": "SELECT benchmark, items FROM benchmarks ORDER BY benchmark",
    "decontamination": """SELECT source, original, removed, final FROM decontamination
        WHERE benchmark = '(all)' ORDER BY source""",
}


def connect(rows: dict, spill: Path | None = None):
    """An in-memory DuckDB holding the ledger tables of `rows` with the ledger's schemas (what
    `ledger.duckdb` holds; a table the rows lack is empty). A table that stays in its part files
    (`PartRows`: clusters, near duplicates, domains) is copied by DuckDB from them, as the ledger is: its
    rows never become Python objects here. With `spill` (a folder), DuckDB holds at most `DUCKDB_MEMORY`
    and writes what does not fit there."""
    import duckdb

    con = duckdb.connect() if spill is None else bounded(duckdb.connect(), spill)
    for name, schema in SCHEMAS.items():
        data = rows.get(name)
        part = data if isinstance(data, PartRows) else None
        table = pa.Table.from_pylist([] if part is not None or data is None else data, schema=schema)
        con.register(f"_{name}", table)
        con.execute(f"CREATE TABLE {name} AS SELECT * FROM _{name}")
        con.unregister(f"_{name}")
        if part is not None:
            con.execute(f"INSERT INTO {name} {parts_select(part)}")
    return con


@dataclass
class Result:
    """A query's name, its parameters, column names and rows."""
    name: str
    params: dict
    columns: list[str]
    rows: list[tuple]


def run_query(con, name: str, **params) -> Result:
    cur = con.execute(QUERIES[name], params) if params else con.execute(QUERIES[name])
    return Result(name, params, [d[0] for d in cur.description], cur.fetchall())
