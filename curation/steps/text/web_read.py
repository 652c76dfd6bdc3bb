"""Readers of web inputs: `WarcReader` (`input.format: warc`) and `HtmlReader` (`input.format: html`).

Thin: the parsers (`iter_warc_records`, `iter_html_pages`) say what each unit of the file is; these
classes decode and extract the main text (`curation.steps.text.extract`), build records and count.
An HTML page in which trafilatura finds no main text is dropped as `no_main_text`; an exception from
the extractor quarantines the page as `extraction_failed`. Metadata: `url` (WARC-Target-URI, or the
page's sidecar/index), `crawl_date` (WARC-Date), `warc_record_id`, `charset` (how the page was
decoded), plus the WARC headers / sidecar fields named in `input.metadata_fields`. Record ids: the
WARC-Record-ID; for pages the `id_field` of their sidecar/index when set, else `<shard>` for a page
file and `<shard>:<member path>` for a page in a tar.
"""
from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

from curation.core.record import Record
from curation.recipe.reading import Extract, Pages
from curation.steps.text.extract import decode_html, extract_main_text
from curation.steps.text.html import HtmlPage, iter_html_pages
from curation.steps.text.inputs import Limits, Rejection
from curation.steps.text.read import _Reader
from curation.steps.text.warc import WarcItem, iter_warc_records


class _WebReader(_Reader):
    def __init__(self, path: Path, *, shard_label: str, extract: Extract | None = None, id_field: str | None = None,
                 metadata_fields: list[str] | tuple[str, ...] = (), limits: Limits | None = None, **kw):
        super().__init__(path, text_field="text", id_field=id_field, metadata_fields=list(metadata_fields),
                         shard_label=shard_label, limits=limits, **kw)
        self.extract = extract or Extract()

    def _document(self, rid: str, loc: str, payload: bytes, *, http_charset: str | None, url: str | None,
                  is_text: bool, meta: dict, seen: set[str]) -> Record | None:
        """One unit with a document in it -> a record, or None after counting why not."""
        self.stats.records_in += 1
        if is_text:  # WET: text already extracted (UTF-8 by the format; stray bytes are noted)
            text, charset = decode_html(payload, http_charset or "utf-8")
        else:
            html, charset = decode_html(payload, http_charset)
            try:
                text = extract_main_text(html, url, self.extract, self.limits.max_record_bytes)
            except Exception as e:  # noqa: BLE001 - lxml/trafilatura failures on hostile markup
                self.quarantine(loc, "extraction_failed", f"{self.path}: {loc}: {e!r}", html[:2000])
                return None
            if text is None:
                self.stats.dropped["no_main_text"] += 1
                return None
        if rid in seen:
            self.quarantine(loc, "duplicate_id", f"{self.path}: id {rid!r} already seen in this shard")
            return None
        seen.add(rid)
        if charset.endswith("+replace"):
            self.stats.notes["charset_replaced"] += 1
        self.stats.records_out += 1
        return Record(id=rid, source=self.source, text=text,
                      meta={**({"url": url} if url else {}), **meta, "charset": charset})


class WarcReader(_WebReader):
    def _parse(self) -> Iterator[Record]:
        seen: set[str] = set()
        units = 0
        for item in iter_warc_records(self.path, self.limits, self.shard_label, tuple(self.metadata_fields)):
            units += 1
            if isinstance(item, Rejection):
                self._reject(item)
                continue
            meta = {"warc_record_id": item.record_id, **({"crawl_date": item.date} if item.date else {}),
                    **item.headers}
            record = self._document(item.record_id, f"{self.shard_label}:{item.record_id}", item.payload,
                                    http_charset=item.http_charset, url=item.url, is_text=item.is_text,
                                    meta=meta, seen=seen)
            if record is not None:
                yield record
        if units == 0:
            self._empty()


class HtmlReader(_WebReader):
    def __init__(self, path: Path, *, pages: Pages | None = None, **kw):
        super().__init__(path, **kw)
        self.pages = pages or Pages()

    def _parse(self) -> Iterator[Record]:
        seen: set[str] = set()
        units = 0
        keep = tuple(dict.fromkeys([*self.metadata_fields, *([self.id_field] if self.id_field else [])]))
        for item in iter_html_pages(self.path, self.limits, self.shard_label, self.pages, keep):
            units += 1
            if isinstance(item, Rejection):
                self._reject(item)
                continue
            rid = item.loc
            if self.id_field:
                value = item.fields.get(self.id_field)
                if value is None or not str(value).strip():
                    self._reject(Rejection(item.loc, "missing_id", f"{self.path}: {item.loc}: id field "
                                           f"{self.id_field!r} is missing from its sidecar/index"))
                    continue
                rid = str(value)
            meta = {k: v for k, v in item.fields.items() if k in self.metadata_fields}
            record = self._document(rid, item.loc, item.payload, http_charset=None, url=item.url, is_text=False,
                                    meta=meta, seen=seen)
            if record is not None:
                yield record
        if units == 0:
            self._empty()
