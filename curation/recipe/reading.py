"""How a source's files are read: decompression bounds, and the main text of web pages.

Used by `Input` (`input.decompression`, `input.extract`, `input.pages`); `input.max_record_bytes`
sits on `Input` itself. Example (a Common Crawl source and a folder of saved pages):

    input: {format: warc, paths: [crawl/*.warc.gz], extract: {favor: balanced}}
    input: {format: html, paths: [pages/*.tar], pages: {index: index.jsonl}, metadata_fields: [crawl_date]}
"""
from __future__ import annotations

from typing import Literal

from pydantic import Field

from curation.recipe.base import Strict


class Decompression(Strict):
    """Limits on gzip/zstd streams: past `max_bytes` of output, or past `max_ratio` times the
    compressed bytes read (judged after the first 64 MiB of output), the rest of the file is
    quarantined as `decompression_bomb`."""
    max_bytes: int = Field(default=64 * 2**30, ge=2**20, le=2**50)
    max_ratio: float = Field(default=200.0, ge=10, le=1e6)


class Extract(Strict):
    """Main-text extraction of HTML pages with trafilatura (`input.format: warc` or `html`).

    `favor`: `precision` (the default) drops more boilerplate and a little text, `recall` keeps more of
    both. On ground truth (reports/benchmarks/extraction.md) precision had the best mean F1 of the three
    and the best precision on every set, for 1-2 points of recall; pretraining favours clean text.
    `fallback`: also run trafilatura's readability/jusText fallbacks when its own pass finds little
    (2-3x slower; 1-2.5 points of F1 on ground truth)."""
    favor: Literal["precision", "recall", "balanced"] = "precision"
    include_tables: bool = True
    include_comments: bool = False
    fallback: bool = True


class Pages(Strict):
    """Where an HTML page's URL and fields come from (`input.format: html`).

    A page `p.html` (or `p.html.gz`, `p.htm`) takes them from a sidecar beside it: `p.json` (an object;
    `url_field` is the URL, `metadata_fields` are kept) or `p.url` (the URL on its first line). In a tar,
    sidecars are members next to their page, and a member named `index` (a JSON-lines file before the
    pages, one object per page, `index_key` holding the page's member path) supplies them for all."""
    index: str = "index.jsonl"
    index_key: str = "file"
    url_field: str = "url"
