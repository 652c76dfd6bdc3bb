"""Readers of web inputs: `WarcReader` (`input.format: warc`) and `HtmlReader` (`input.format: html`).

Thin: the parsers (`iter_warc_records`, `iter_html_pages`) say what each unit of the file is; these
classes decode and extract the main text (`curation.steps.text.readers.extract`) and build records; the
`Reader` base counts. An HTML page in which trafilatura finds no main text is dropped as
`no_main_text`; an exception from the extractor quarantines the page as `extraction_failed`.
Metadata: `url` (WARC-Target-URI, or the page's sidecar/index), `crawl_date` (WARC-Date),
`warc_record_id`, `charset` (how the page was decoded), plus the WARC headers / sidecar fields named in
`input.metadata_fields`. Record ids: the WARC-Record-ID; for pages the `id_field` of their
sidecar/index when set, else `<shard>` for a page file and `<shard>:<member path>` for a page in a tar.
A page whose charset could only be guessed with replacement characters is counted in the step's notes
(`charset_replaced`).
"""
from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

from curation.core.record import Record
from curation.recipe.reading import Extract, Pages
from curation.steps.base import Reader, Reject
from curation.steps.text.readers.extract import decode_page, extract_main_text
from curation.steps.text.readers.html import iter_html_pages
from curation.steps.text.readers.inputs import Limits
from curation.steps.text.readers.warc import iter_warc_records


class _WebReader(Reader):
    def __init__(self, path: Path, *, shard_label: str, extract: Extract | None = None, id_field: str | None = None,
                 metadata_fields: list[str] | tuple[str, ...] = (), limits: Limits | None = None, **kw):
        super().__init__(path, shard_label=shard_label, **kw)
        self.extract, self.id_field = extract or Extract(), id_field
        self.metadata_fields, self.limits = list(metadata_fields), limits or Limits()

    def _document(self, rid: str, loc: str, payload: bytes, *, http_charset: str | None, url: str | None,
                  is_text: bool, meta: dict) -> Record | Reject:
        """One unit with a document in it -> a record, or why not."""
        if is_text:  # WET: text already extracted (UTF-8 by the format; stray bytes are noted)
            text, charset, overridden = decode_page(payload, http_charset or "utf-8")
        else:
            html, charset, overridden = decode_page(payload, http_charset)
            try:
                text = extract_main_text(html, url, self.extract, self.limits.max_record_bytes)
            except Exception as e:  # noqa: BLE001 - lxml/trafilatura failures on hostile markup
                return Reject(loc, "extraction_failed", f"{self.path}: {loc}: {e!r}", html[:2000])
            if text is None:
                return Reject(loc, "no_main_text", f"{self.path}: {loc}: trafilatura found no main text",
                              quarantine=False)
        if charset.endswith("+replace"):
            self.stats.notes["charset_replaced"] += 1
        if overridden:
            self.stats.notes["charset_override"] += 1
        return Record(id=rid, source=self.source, text=text,
                      meta={**({"url": url} if url else {}), **meta, "charset": charset,
                            **({"charset_override": overridden} if overridden else {})})


class WarcReader(_WebReader):
    def parse(self) -> Iterator[Record | Reject]:
        for item in iter_warc_records(self.path, self.limits, self.shard_label, tuple(self.metadata_fields)):
            if isinstance(item, Reject):
                yield item
                continue
            meta = {"warc_record_id": item.record_id, **({"crawl_date": item.date} if item.date else {}),
                    **item.headers}
            yield self._document(item.record_id, f"{self.shard_label}:{item.record_id}", item.payload,
                                 http_charset=item.http_charset, url=item.url, is_text=item.is_text, meta=meta)


class HtmlReader(_WebReader):
    def __init__(self, path: Path, *, pages: Pages | None = None, **kw):
        super().__init__(path, **kw)
        self.pages = pages or Pages()

    def parse(self) -> Iterator[Record | Reject]:
        keep = tuple(dict.fromkeys([*self.metadata_fields, *([self.id_field] if self.id_field else [])]))
        for item in iter_html_pages(self.path, self.limits, self.shard_label, self.pages, keep):
            if isinstance(item, Reject):
                yield item
                continue
            rid = item.loc
            if self.id_field:
                value = item.fields.get(self.id_field)
                if value is None or not str(value).strip():
                    yield Reject(item.loc, "missing_id", f"{self.path}: {item.loc}: id field {self.id_field!r} "
                                 f"is missing from its sidecar/index")
                    continue
                rid = str(value)
            meta = {k: v for k, v in item.fields.items() if k in self.metadata_fields}
            yield self._document(rid, item.loc, item.payload, http_charset=None, url=item.url, is_text=False,
                                 meta=meta)
