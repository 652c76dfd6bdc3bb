"""The EU AI Act "Public Summary of Training Content", generated from the ledger on every run:
`reports/ai_act_summary.md` and `reports/ai_act_summary.html` beside the run report.

Apertus publishes this document, following the European Commission's template, written by hand from its
legal spreadsheet (Apertus 1.5, "Transparency Documentation"). Here it follows the template's three
sections from the ledger alone: 1 general information (provider and model as the recipe's `transparency:`
section declares them, the modalities and the training data size per modality in the template's bands),
2 the list of data sources by the template's categories (publicly available datasets; data crawled by the
provider, with the crawler, the collection period and the top web domains by share of tokens; licensed
data; synthetic data; user data), 3 the data-processing aspects (how and when the opt-outs were read,
the licence policy, personal-data and harmful-content removal, decontamination).

Traceability: every number in the document is a cell of a named query (`curation.report.ai_act_queries`), run over the ledger
tables (the same rows as `ledger/ledger.duckdb`, so `curate ledger OUT --sql "<the query>"` prints the
same values); each table in the document names its query, and the appendix lists every query's name and
SQL. Nothing is invented: a field the recipe does not declare reads "not declared in the recipe", a table
with no rows says what that means for the run. The document makes no claim that any obligation is met
(as Apertus' does not).

The size bands (`BANDS`) are the template's, as its section 1.3 ("training data size") offers them per
modality. They are NOT quoted in the seed reports (`../shared/seeds/`, which only name the template), so
they come from the Commission's published template (July 2025) as we read it: text in tokens (< 1 billion,
1 billion to 10 trillion, > 10 trillion), images in images (< 1 million, 1 million to 1 billion,
> 1 billion), audio and video in hours (< 1,000, 1,000 to 1 million, > 1 million). Check them against the
template in force before publishing.
"""
from __future__ import annotations

import html
import math
import re
import tempfile
from dataclasses import dataclass
from pathlib import Path

from curation.core.atomic import atomic_write_bytes
from curation.report.ai_act_queries import QUERIES, TOP_DOMAIN_SHARE, Result, connect, run_query
from curation.report.table import inline

__all__ = ["BANDS", "NOT_DECLARED", "QUERIES", "TOP_DOMAIN_SHARE", "band", "connect", "fmt", "run_query",
           "write_summary"]

NOT_DECLARED = "not declared in the recipe"

# (upper bound of the lower band, lower bound of the upper band, unit, the three band labels); a value
# equal to a bound falls in the middle band ("1 billion to 10 trillion" includes both ends)
BANDS: dict[str, tuple[float, float, tuple[str, str, str]]] = {
    "text": (1e9, 1e13, ("less than 1 billion tokens", "1 billion to 10 trillion tokens",
                         "more than 10 trillion tokens")),
    "image": (1e6, 1e9, ("less than 1 million images", "1 million to 1 billion images", "more than 1 billion images")),
    "audio": (1e3, 1e6, ("less than 1,000 hours", "1,000 to 1 million hours", "more than 1 million hours")),
    "video": (1e3, 1e6, ("less than 1,000 hours", "1,000 to 1 million hours", "more than 1 million hours")),
}

# the origins of the template's section 2, in its order, with their headings
ORIGINS = (("publicly_available", "2.1 Publicly available datasets"),
           ("crawled", "2.2 Data crawled and scraped from online sources by the provider"),
           ("licensed", "2.3 Commercially licensed data"), ("synthetic", "2.4 Synthetic data"))


def band(modality: str, value: float) -> str:
    """The template's size band of `value` (tokens, images or hours) for `modality`."""
    low, high, labels = BANDS[modality]
    return labels[0] if value < low else labels[2] if value > high else labels[1]


def fmt(value) -> str:
    """One spelling per value, used for every cell: integers with thousands separators, other numbers with
    up to four decimals, NULL as a dash."""
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, int):
        return f"{value:,}"
    if isinstance(value, float):
        if math.isfinite(value) and value == int(value) and abs(value) < 1e15:
            return f"{int(value):,}"
        return f"{value:,.4f}".rstrip("0").rstrip(".")
    return str(value)


def _scalar(r: Result):
    return r.rows[0][0]


def _cite(r: Result) -> str:
    args = ", ".join(f"{k} = '{v}'" for k, v in r.params.items())
    return f"query `{r.name}`" + (f" ({args})" if args else "")


@dataclass
class Block:
    """A paragraph, or a table with the query it shows."""
    text: str = ""
    result: Result | None = None
    heading: str = ""
    level: int = 0


def _declared(decl: dict, field: str) -> str:
    v = decl.get(field)
    return v if v else NOT_DECLARED


def _blocks(con) -> list[Block]:
    b: list[Block] = []
    decl_r = run_query(con, "declarations")
    decl = {f: v for f, v in decl_r.rows}

    b.append(Block(heading="1. General information", level=2))
    b.append(Block(heading="1.1 Provider and model", level=3))
    b.append(Block(f"Provider: {_declared(decl, 'provider')}; contact: {_declared(decl, 'provider_contact')}. "
                   f"Model: {_declared(decl, 'model')}, version {_declared(decl, 'model_version')} "
                   f"({_cite(decl_r)}, the recipe's `transparency:` section and compliance settings)."))
    b.append(Block(result=decl_r))
    b.append(Block(heading="1.2 Modalities and training data size", level=3))
    mods = run_query(con, "modalities")
    present = {m for m, *_ in mods.rows}
    b.append(Block(f"Modalities of the training data: {', '.join(sorted(present)) or 'none'} ({_cite(mods)}); "
                   "the model's output modalities are not recorded in the ledger. Tokens are counted in the "
                   "main shards of the included sources."))
    b.append(Block(result=mods))
    text, images, hours = run_query(con, "text_tokens"), run_query(con, "images"), run_query(con, "audio_hours")
    lines = [f"- Text: {fmt(_scalar(text))} tokens, band *{band('text', _scalar(text))}* ({_cite(text)})",
             f"- Images: {fmt(_scalar(images))} images, band *{band('image', _scalar(images))}* ({_cite(images)})"
             if "image" in present or "interleaved" in present else "- Images: none in this run",
             f"- Audio: {fmt(_scalar(hours))} hours, band *{band('audio', _scalar(hours))}* ({_cite(hours)})"
             if "audio" in present else "- Audio: none in this run",
             "- Video: none (curate has no video modality)"]
    b.append(Block("\n".join(lines)))
    b.append(Block("Bands: the template's section 1.3 per modality, as `curation.report.ai_act.BANDS` reads the "
                   "Commission's template (the seed reports do not quote them). Images inside interleaved "
                   "documents are counted as images; a caption or transcript counts as text."))
    stages = run_query(con, "stage_tokens")
    if stages.rows:
        b.append(Block(f"Tokens the recipe's stages plan to train on (effective tokens, epochs applied; "
                       f"{_cite(stages)}):"))
        b.append(Block(result=stages))

    b.append(Block(heading="2. List of data sources", level=2))
    b.append(Block("Every included source by the template's category (query `sources_by_origin`, once per "
                   "category); the category is declared in `transparency.sources` or derived as the `basis` "
                   "column says."))
    for origin, heading in ORIGINS:
        b.append(Block(heading=heading, level=3))
        mine = run_query(con, "sources_by_origin", origin=origin)
        if not mine.rows:
            b.append(Block(f"None: no included source has the category `{origin}` ({_cite(mine)})."))
        else:
            b.append(Block(result=mine))
        if origin == "crawled":
            period = (f"{decl['collection_start']} to {decl['collection_end']}" if decl.get("collection_start")
                      else NOT_DECLARED)
            b.append(Block(f"Crawler: {_declared(decl, 'crawler')}. Period of collection: {period} "
                           f"({_cite(decl_r)})."))
        if origin in ("crawled", "publicly_available") and mine.rows:
            top = run_query(con, "top_domains", origin=origin)
            nourl = run_query(con, "no_url_tokens", origin=origin)
            if top.rows:
                lead = ("Top web domains by share of tokens" if origin == "crawled" else
                        "For information (the template asks this of crawled data): top web domains of these "
                        "datasets' page URLs by share of tokens")
                b.append(Block(f"{lead}, the top {TOP_DOMAIN_SHARE:.0%} of {fmt(top.rows[0][5])} domains "
                               f"(registrable domain of the page URL; {_cite(top)}); documents without a page URL: "
                               f"{fmt(nourl.rows[0][0])} with {fmt(nourl.rows[0][1])} tokens ({_cite(nourl)})."))
                b.append(Block(result=top))
            elif origin == "crawled":
                b.append(Block(f"No crawled document has a page URL, so no domain can be listed ({_cite(top)})."))
    b.append(Block(heading="2.5 User data", level=3))
    b.append(Block("None: curate reads datasets and URL lists; it has no input for data from users of the "
                   "model or of the provider's services."))
    b.append(Block(heading="2.6 Other sources of data", level=3))
    b.append(Block("None beyond the sources above: every input of the run is a source of the recipe."))

    b.append(Block(heading="3. Data processing aspects", level=2))
    b.append(Block(heading="3.1 Respect of reservation of rights (opt-outs)", level=3))
    snaps = run_query(con, "robots_snapshots")
    agents = decl.get("optout.agents")
    if snaps.rows:
        b.append(Block(f"Machine-readable opt-outs (robots.txt) are honoured retroactively: a page is removed when "
                       f"its domain disallows any of the agents {agents} in any snapshot, whatever the crawl date; "
                       f"domain rule: {decl.get('optout.match')}. Snapshots read, from {snaps.rows[0][0]} to "
                       f"{snaps.rows[-1][0]} ({_cite(snaps)}):"))
        b.append(Block(result=snaps))
    else:
        b.append(Block(f"No robots.txt snapshots: the recipe sets no `optout`, so no opt-out was applied "
                       f"({_cite(snaps)})."))
    opt = run_query(con, "optout")
    b.append(Block(f"Per source, how the opt-out applied and what it removed ({_cite(opt)}); a source without a "
                   "page URL cannot be attributed to a site owner and says so:"))
    b.append(Block(result=opt))
    b.append(Block(heading="3.2 Licence policy", level=3))
    lic = run_query(con, "licences")
    b.append(Block(f"Licence classes excluded: {decl.get('licence_policy.exclude') or 'none'} (records of an "
                   f"unknown or all-rights-reserved licence are always excluded unless the recipe admits unknown "
                   f"ones). Per source ({_cite(lic)}):"))
    b.append(Block(result=lic))
    b.append(Block(heading="3.3 Removal of personal data and of harmful content", level=3))
    pii = run_query(con, "pii")
    b.append(Block(f"Personal data replaced by placeholders, per source and kind ({_cite(pii)})" +
                   (":" if pii.rows else ": none replaced (no source ran the `pii` step, or it found none).")))
    if pii.rows:
        b.append(Block(result=pii))
    tox = run_query(con, "toxicity")
    b.append(Block(f"Toxic content removed by the toxicity classifier ({_cite(tox)})" +
                   (":" if tox.rows else ": no source ran a toxicity step.")))
    if tox.rows:
        b.append(Block(result=tox))
    feeds = run_query(con, "network_feeds")
    b.append(Block(f"Threat feeds (malware, abuse hosts) the acquisition's network guard blocked ({_cite(feeds)})" +
                   (":" if feeds.rows else ": none compiled in this run.")))
    if feeds.rows:
        b.append(Block(result=feeds))
    b.append(Block("curate runs no dedicated filter for illegal content (for instance CSAM hash lists); what is "
                   "listed here is all the ledger records."))
    b.append(Block(heading="3.4 Decontamination against evaluation benchmarks", level=3))
    bench = run_query(con, "benchmarks")
    if bench.rows:
        dec = run_query(con, "decontamination")
        b.append(Block(f"Documents whose n-grams overlap an item of these benchmarks were removed by id "
                       f"({_cite(bench)}, {_cite(dec)}):"))
        b.append(Block(result=bench))
        b.append(Block(result=dec))
    else:
        b.append(Block(f"None: the recipe names no benchmarks ({_cite(bench)})."))
    return b


def _md_table(r: Result) -> str:
    head = "| " + " | ".join(r.columns) + " |"
    sep = "|" + "|".join("---" for _ in r.columns) + "|"
    body = ["| " + " | ".join(fmt(v).replace("|", "\\|") for v in row) + " |" for row in r.rows]
    cap = f"*{_cite(r)}*" + ("" if r.rows else ": no rows")
    return "\n".join([cap, "", head, sep, *body]) if r.rows else cap


def _html_table(r: Result) -> str:
    cap = f"<caption>{inline(_cite(r))}</caption>"
    if not r.rows:
        return f"<p><i>{inline(_cite(r))}: no rows</i></p>"
    head = "".join(f"<th>{html.escape(c)}</th>" for c in r.columns)
    body = "".join("<tr>" + "".join(f"<td{' class=num' if isinstance(v, (int, float)) and not isinstance(v, bool) else ''}>"
                                    f"{html.escape(fmt(v))}</td>" for v in row) + "</tr>" for row in r.rows)
    return f"<table data-query='{html.escape(r.name)}'>{cap}<tr>{head}</tr>{body}</table>"


def _title(con) -> tuple[str, str]:
    run = con.execute("SELECT recipe, run FROM runs LIMIT 1").fetchone()
    return (run[0], run[1]) if run else ("unknown", "unknown")


_INTRO = ("Generated by curate from the run's ledger, following the structure of the European Commission's "
          "template for the public summary of training content of general-purpose AI models. Every number is a "
          "cell of a named ledger query; the appendix gives each query's SQL, which `curate ledger OUT --sql` "
          "runs against `ledger/ledger.duckdb`. This document asserts no legal obligation is met.")


_APPENDIX = ("Each query runs on `ledger/ledger.duckdb` as written, with `curate ledger OUT --sql \"...\"`; a "
             "query with `$origin` takes the value its citation names (`$origin` replaced by `'crawled'`, ...).")


def markdown(con) -> str:
    recipe, run = _title(con)
    md = [f"# Public Summary of Training Content: {recipe}", "", f"Recipe `{recipe}`, run `{run}`. {_INTRO}", ""]
    for blk in _blocks(con):
        if blk.heading:
            md += ["#" * blk.level + " " + blk.heading, ""]
        elif blk.result is not None:
            md += [_md_table(blk.result), ""]
        else:
            md += [blk.text, ""]
    md += ["## Appendix: ledger queries", "", _APPENDIX, ""]
    for name, sql in QUERIES.items():
        md += [f"### `{name}`", "", "```sql", _dedent(sql), "```", ""]
    return "\n".join(md)


def _dedent(sql: str) -> str:
    lines = sql.strip("\n").split("\n")
    indent = min((len(x) - len(x.lstrip()) for x in lines[1:] if x.strip()), default=0)
    return "\n".join([lines[0].strip(), *(x[indent - 4:] if indent >= 4 else x for x in lines[1:])])


CSS = """body{font-family:system-ui,sans-serif;max-width:1100px;margin:2em auto;padding:0 1em;color:#222}
table{border-collapse:collapse;margin:.5em 0 1.5em;font-size:14px}th,td{border:1px solid #ccc;padding:3px 8px}
th{background:#f0f0f0}td.num{text-align:right;font-variant-numeric:tabular-nums}code{background:#f4f4f4}
caption{caption-side:top;text-align:left;color:#555;font-size:13px;padding:2px 0}pre{background:#f7f7f7;padding:.6em}
h2{border-bottom:1px solid #ddd;padding-bottom:.2em;margin-top:2em}"""


def _inline(text: str) -> str:
    """`inline` plus the Markdown's *emphasis* (the size bands)."""
    return re.sub(r"\*([^*]+)\*", r"<em>\1</em>", inline(text))


def _html_text(text: str) -> str:
    items = text.split("\n")
    if all(x.startswith("- ") for x in items):
        return "<ul>" + "".join(f"<li>{_inline(x[2:])}</li>" for x in items) + "</ul>"
    return f"<p>{_inline(text)}</p>"


def html_doc(con) -> str:
    recipe, run = _title(con)
    t = html.escape(recipe)
    body = [f"<h1>Public Summary of Training Content: {t}</h1>",
            f"<p>{inline(f'Recipe `{recipe}`, run `{run}`. {_INTRO}')}</p>"]
    for blk in _blocks(con):
        if blk.heading:
            body.append(f"<h{blk.level}>{html.escape(blk.heading)}</h{blk.level}>")
        elif blk.result is not None:
            body.append(_html_table(blk.result))
        else:
            body.append(_html_text(blk.text))
    body += ["<h2>Appendix: ledger queries</h2>", f"<p>{inline(_APPENDIX)}</p>"]
    for name, sql in QUERIES.items():
        body += [f"<h3 id='q-{html.escape(name)}'><code>{html.escape(name)}</code></h3>",
                 f"<pre><code>{html.escape(_dedent(sql))}</code></pre>"]
    return (f"<!doctype html><html><head><meta charset='utf-8'><title>Public Summary of Training Content: {t}"
            f"</title><style>{CSS}</style></head><body>\n" + "\n".join(body) + "\n</body></html>\n")


def write_summary(rows: dict, rdir: Path) -> Path:
    """Write `ai_act_summary.md` and `ai_act_summary.html` into the reports folder `rdir`; returns the HTML."""
    with tempfile.TemporaryDirectory(prefix="curate-summary-") as spill:
        con = connect(rows, Path(spill))
        try:
            md, page = markdown(con), html_doc(con)
        finally:
            con.close()
    atomic_write_bytes(rdir / "ai_act_summary.md", md.encode())
    atomic_write_bytes(rdir / "ai_act_summary.html", page.encode())
    return rdir / "ai_act_summary.html"
