"""The EU AI Act public summary (`curation.report.ai_act`): written on every run beside the report, every
number in it equal to its named query run independently against `ledger.duckdb`, the template's size
bands right at their edges, undeclared fields stated as such, the HTML well formed."""
from __future__ import annotations

import copy
import math
import re
from html.parser import HTMLParser
from pathlib import Path

import duckdb
import pyarrow.parquet as pq
import pytest

from curation.ledger.store import read_rows
from curation.recipe.load import load_recipe
from curation.report.ai_act import BANDS, NOT_DECLARED, QUERIES, TOP_DOMAIN_SHARE, band, fmt, write_summary
from curation.steps.compliance.domains import web_domain
from tests.sessions import REPO


def test_bands_at_their_edges():
    assert band("text", 0) == band("text", 999_999_999) == "less than 1 billion tokens"
    assert band("text", 1_000_000_000) == band("text", 10 ** 13) == "1 billion to 10 trillion tokens"
    assert band("text", 10 ** 13 + 1) == "more than 10 trillion tokens"
    assert band("image", 999_999) == "less than 1 million images"
    assert band("image", 1_000_000) == band("image", 10 ** 9) == "1 million to 1 billion images"
    assert band("image", 10 ** 9 + 1) == "more than 1 billion images"
    assert band("audio", 999.99) == "less than 1,000 hours"
    assert band("audio", 1000) == band("audio", 1e6) == "1,000 to 1 million hours"
    assert band("audio", 1e6 + 0.01) == "more than 1 million hours"
    assert set(BANDS) == {"text", "image", "audio", "video"}


def test_web_domain_is_the_registrable_domain_of_the_page_url():
    assert web_domain("https://Meta.StackExchange.com/q/1") == "stackexchange.com"
    assert web_domain("http://www.bbc.co.uk/news") == "bbc.co.uk"
    assert web_domain("https://10.0.0.1/x") == "10.0.0.1"
    assert web_domain(None) is None and web_domain("") is None and web_domain("http:///no-host") is None


def _tables(md: str) -> dict[str, list[list[str]]]:
    """Each table of the Markdown by the query citation above it: {citation: rows of cells}."""
    out, lines = {}, md.split("\n")
    for i, line in enumerate(lines):
        m = re.fullmatch(r"\*(query `[a-z_]+`(?: \([^)]*\))?)\*", line)
        if m and i + 2 < len(lines) and lines[i + 2].startswith("| "):
            rows, j = [], i + 4
            while j < len(lines) and lines[j].startswith("| "):
                rows.append([c.strip().replace("\\|", "|") for c in re.split(r"(?<!\\)\|", lines[j])[1:-1]])
                j += 1
            out[m.group(1)] = rows
    return out


def _independent(db: Path, citation: str) -> list[list[str]]:
    name = re.match(r"query `([a-z_]+)`", citation).group(1)
    params = dict(re.findall(r"(\w+) = '([^']*)'", citation))
    con = duckdb.connect(str(db), read_only=True)
    try:
        rows = con.execute(QUERIES[name], params).fetchall() if params else con.execute(QUERIES[name]).fetchall()
    finally:
        con.close()
    return [[fmt(v) for v in r] for r in rows]


VOID = frozenset({"meta", "br", "img", "hr", "link"})


class _Checker(HTMLParser):
    """Fails on a closing tag that does not close the innermost open element; counts tables."""

    def __init__(self):
        super().__init__()
        self.stack, self.tables, self.errors = [], 0, []

    def handle_starttag(self, tag, attrs):
        self.tables += tag == "table"
        if tag not in VOID:
            self.stack.append(tag)

    def handle_endtag(self, tag):
        if not self.stack or self.stack.pop() != tag:
            self.errors.append(tag)


def _check_summary(out: Path) -> str:
    rdir = out / "reports"
    md = (rdir / "ai_act_summary.md").read_text()
    db = out / "ledger" / "ledger.duckdb"
    tables = _tables(md)
    assert {"query `modalities`", "query `sources_by_origin` (origin = 'publicly_available')", "query `optout`",
            "query `licences`", "query `declarations`"} <= set(tables)
    for citation, cells in tables.items():          # every table is its query's result, cell by cell
        assert cells == _independent(db, citation), citation
    for name in ("text_tokens", "images", "audio_hours"):   # the figures in the text, too
        if f"(query `{name}`)" in md:
            [[value]] = _independent(db, f"query `{name}`")
            assert re.search(rf": {re.escape(value)} \w+, band \*[^*]+\* \(query `{name}`\)", md), name
    for name in QUERIES:                            # the appendix lists every query with its SQL
        assert f"### `{name}`" in md
    # the text tokens, counted without SQL from the ledger's Parquet: the same figure
    tokens = pq.read_table(out / "ledger" / "tokens.parquet").to_pylist()
    text = sum(t["text_tokens"] for t in tokens if t["pool"] == "main")
    assert f"- Text: {fmt(text)} tokens, band *{band('text', text)}*" in md
    page = (rdir / "ai_act_summary.html").read_text()
    checker = _Checker()
    checker.feed(page)
    checker.close()
    assert not checker.errors and checker.stack == []
    assert checker.tables == len(tables) and page.count("data-query=") == len(tables)
    assert "<h2>3. Data processing aspects</h2>" in page
    return md


@pytest.mark.slow
def test_demo_summary_numbers_are_their_queries(demo_run):
    md = _check_summary(demo_run.out)
    assert "Provider: curate demo (placeholder" in md
    assert "- Audio: " in md and "- Images: " in md
    assert "| 2023-06-01 | 2 |" in md and "| 2025-01-15 | 3 |" in md   # the demo's two robots.txt snapshots
    assert "### 2.5 User data\n\nNone" in md


@pytest.mark.slow
def test_domain_tokens_sum_to_each_sources_main_shards(demo_run):
    """The tokenize tasks' per-domain counts add up to the tokens the ledger counts from the merged shards,
    per source; only sources without page URLs (images, audio) have their documents under NULL."""
    rows = read_rows(demo_run.out / "ledger")
    for t in (t for t in rows["tokens"] if t["pool"] == "main"):
        mine = [d for d in rows["domain_tokens"] if d["source"] == t["source"]]
        assert sum(d["tokens"] for d in mine) == t["total_tokens"], t["source"]
        assert sum(d["documents"] for d in mine) == t["documents"], t["source"]
    named = {d["source"] for d in rows["domain_tokens"] if d["web_domain"]}
    assert named == {"web_en", "web_warc", "c4_en", "web_de"}


@pytest.mark.slow
def test_text_summary_states_what_the_recipe_does_not_declare(text_run):
    md = _check_summary(text_run.out)
    assert f"Provider: {NOT_DECLARED}" in md and f"Crawler: {NOT_DECLARED}" in md
    assert "- Images: none in this run" in md and "- Audio: none in this run" in md


@pytest.mark.slow
def test_crawled_sources_list_crawler_period_and_top_domains(demo_run, tmp_path):
    rows = copy.deepcopy(read_rows(demo_run.out / "ledger"))
    for o in rows["source_origins"]:
        if o["source"] == "web_de":
            o["origin"], o["basis"] = "crawled", "declared in the recipe (transparency.sources)"
    for t in rows["transparency"]:
        t["value"] = {"crawler": "ExampleBot/1.0", "collection_start": "2023-06-01",
                      "collection_end": "2025-01-15"}.get(t["field"], t["value"])
    write_summary(rows, tmp_path)
    md = (tmp_path / "ai_act_summary.md").read_text()
    crawled = md.split("### 2.2 ")[1].split("### 2.3 ")[0]
    assert "Crawler: ExampleBot/1.0. Period of collection: 2023-06-01 to 2025-01-15" in crawled
    named = [r for r in rows["domain_tokens"] if r["source"] == "web_de" and r["web_domain"]]
    domains = {r["web_domain"] for r in named}
    top = _tables(md)["query `top_domains` (origin = 'crawled')"]
    assert len(top) == max(1, math.ceil(TOP_DOMAIN_SHARE * len(domains)))
    total = sum(r["tokens"] for r in rows["domain_tokens"] if r["source"] == "web_de")
    by_domain = {}
    for r in named:
        by_domain[r["web_domain"]] = by_domain.get(r["web_domain"], 0) + r["tokens"]
    best = sorted(by_domain.items(), key=lambda kv: (-kv[1], kv[0]))[: len(top)]
    assert [(r[1], r[3], r[4]) for r in top] == [(d, fmt(t), fmt(round(100 * t / total, 2))) for d, t in best]
    # the token total per domain is the source's tokens in its main shards
    [main] = [t for t in rows["tokens"] if t["source"] == "web_de" and t["pool"] == "main"]
    assert total == main["total_tokens"]


def _with_transparency(tmp_path: Path, block: str) -> Path:
    src = (REPO / "recipes" / "text.yaml").read_text()
    path = REPO / "recipes" / f".aiact-{tmp_path.name}.yaml"   # beside the original: its relative paths hold
    path.write_text(src + "\n" + block)
    return path


def test_transparency_section_is_in_no_fingerprint(tmp_path):
    path = _with_transparency(tmp_path, "transparency:\n  provider: Example Lab\n  model: example-8b\n"
                                        "  collection_period: {start: 2024-01-01, end: 2024-06-30}\n"
                                        "  sources: {web_en: licensed}\n")
    try:
        declared = load_recipe(path)
        plain = load_recipe(REPO / "recipes" / "text.yaml")
    finally:
        path.unlink()
    assert declared.fingerprint == plain.fingerprint
    t = declared.recipe.transparency
    assert t.provider == "Example Lab" and t.sources == {"web_en": "licensed"}
    assert dict(t.fields())["collection_end"] == "2024-06-30" and dict(t.fields())["crawler"] is None


@pytest.mark.parametrize("block, message", [
    ("transparency:\n  sources: {nosuch: licensed}\n", "transparency.sources names unknown source"),
    ("transparency:\n  sources: {web_en: user}\n", "transparency"),
    ("transparency:\n  collection_period: {start: 2025-01-01, end: 2024-01-01}\n", "before start"),
    ("transparency:\n  provder: x\n", "unknown key"),
])
def test_bad_transparency_sections_are_refused(tmp_path, block, message):
    from curation.errors import RecipeError
    path = _with_transparency(tmp_path, block)
    try:
        with pytest.raises(RecipeError, match=message):
            load_recipe(path)
    finally:
        path.unlink()
