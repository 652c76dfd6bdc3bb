"""WARC and WET files: every record accounted for, HTML responses reduced to their main text.

`iter_warc_records(path, limits, label)` yields a `WarcItem` for each record that carries a document
and a `Reject` for every other record, so that records in = documents + drops + quarantines:

| record | outcome |
|---|---|
| `response`/`resource` with an HTML payload (`text/html`, `application/xhtml+xml`; the crawler's `WARC-Identified-Payload-Type` first, then the HTTP `Content-Type`, else a sniff) | a `WarcItem` (raw payload, HTTP charset) |
| `conversion` (WET) | a `WarcItem` with the text as it is |
| `request`, `metadata`, `warcinfo`, `revisit` | dropped: `warc_request`, `warc_metadata`, `warc_warcinfo`, `warc_revisit` |
| a response that is not HTML, or has HTTP status 3xx / 4xx-5xx | dropped: `not_html`, `http_redirect`, `http_error` |
| damaged: unparseable header (`warc_bad_header`), a Content-Length that runs into the next record (`warc_bad_length`; reading resumes at that record), fewer bytes than its Content-Length (`warc_truncated`), a payload over `max_record_bytes` (`record_too_large`), an undecodable Content-Encoding (`bad_content_encoding`), a segmented record (`warc_segmented`), an unknown type (`warc_unknown_type`) | quarantined |
| gzip damage: `truncated_gzip`, `corrupt_gzip`, `decompression_bomb` (the rest of the member) | quarantined |

Parsing is warcio's (`ArcWarcRecordLoader`: WARC 0.17-1.1 and ARC headers, HTTP headers, chunked
transfer encoding, gzip/deflate Content-Encoding); the loop around it is ours, because warcio's
`ArchiveIterator` stops at the first bad record and reads a payload whole. `.warc.gz` files are read
gzip member by member, as Common Crawl writes them (one record per member); a damaged member is
quarantined and reading resumes at the next member that starts a WARC record. Whole-file gzip,
plain `.warc` and `.warc.zst` (without a dictionary) are one stream; after a bad header, reading
resumes at the next `WARC/` line. Header lines are capped at 1 MiB and a record's headers at 4 MiB.

A record's end is checked in a plain (seekable) WARC: when its block runs to the end of the file or is
not followed by the next `WARC/` header, its Content-Length is wrong; if a record header
(`\r\n\r\nWARC/1.`) lies inside the block, the record is quarantined as `warc_bad_length` and reading
resumes at that header, so a Content-Length that is too long no longer swallows the records after it.
(A gzip member holds one record, so there the member's end bounds the damage.)
"""
from __future__ import annotations

import io
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from curation.core.io import open_input
from curation.steps.base import Reject
from curation.steps.text.readers.extract import charset_from_content_type, looks_like_html
from curation.steps.text.readers.gzip_members import Member, next_member
from curation.steps.text.readers.inputs import (
    GZIP_MAGIC,
    ZSTD_MAGIC,
    InputDamage,
    Limits,
    Oversize,
    codec_for,
    open_bounded,
    read_bounded,
)

HTML_TYPES = ("text/html", "application/xhtml+xml", "application/xml+xhtml", "application/vnd.wap.xhtml+xml")
_DROPPED = {"request": "warc_request", "metadata": "warc_metadata", "warcinfo": "warc_warcinfo",
            "revisit": "warc_revisit"}
_LINE_CAP = 1 << 20
_HEADER_BUDGET = 4 << 20
_READ = 1 << 16


@dataclass(frozen=True, slots=True)
class WarcItem:
    """A WARC record holding a document: `payload` is raw HTML bytes, or text for a WET `conversion`."""
    record_id: str
    url: str | None
    date: str | None
    warc_type: str
    payload: bytes
    http_charset: str | None = None
    headers: dict[str, str] = field(default_factory=dict)  # the WARC headers the recipe keeps

    @property
    def is_text(self) -> bool:
        return self.warc_type == "conversion"


class _HeaderTooLong(Exception):
    pass


class _Capped:
    """The stream warcio parses: `readline` is capped per line and per record (warcio reads header
    lines without a length), `read` is passed through (every caller here asks for a bounded amount)."""

    def __init__(self, buf):
        self.buf = buf
        self.budget = _HEADER_BUDGET

    def read(self, length=None):
        return self.buf.read(_READ if length is None or length < 0 else length)

    def readline(self, length=None):
        cap = _LINE_CAP if length is None else min(length, _LINE_CAP)
        line = self.buf.readline(cap)
        self.budget -= len(line)
        if (len(line) >= cap and not line.endswith(b"\n") and (length is None or length > cap)) or self.budget < 0:
            raise _HeaderTooLong(f"a header line or header block is over {_LINE_CAP:,}/{_HEADER_BUDGET:,} bytes")
        return line


def _skip_to_record(stream: _Capped) -> bytes | None:
    """After a bad header: the next line that starts a WARC record, or None at the end of the stream."""
    while True:
        stream.budget = _HEADER_BUDGET
        line = stream.buf.readline(_LINE_CAP)
        if not line:
            return None
        if line.startswith(b"WARC/"):
            return line


def _blank_lines(stream: _Capped) -> bytes | None:
    """Consume the blank lines after a record; the first other line (the next record's), or None."""
    while line := stream.readline():
        if line.strip():
            return line
    return None


_BOUNDARY = b"\r\n\r\nWARC/1."


def _at_boundary(buf) -> bool:
    """Whether what follows the current position is the end of the stream or the next record's header
    (after the blank lines that end a record); the position is kept."""
    pos = buf.tell()
    peek = buf.read(256)
    buf.seek(pos)
    rest = peek.lstrip(b"\r\n")
    return not rest or rest.startswith(b"WARC/") or not peek.strip(b"\r\n")


def _resync(buf, start: int, end: int) -> int | None:
    """The offset of the first record header in (start, end] of a seekable stream, or None."""
    buf.seek(start)
    carry, pos = b"", start
    while pos < end:
        chunk = buf.read(min(_READ, end - pos + len(_BOUNDARY)))
        if not chunk:
            break
        data = carry + chunk
        i = data.find(_BOUNDARY, 1 if pos == start else 0)
        if i != -1:
            return pos - len(carry) + i + 4
        carry = data[-len(_BOUNDARY):]
        pos += len(chunk)
    return None


def _mime(record) -> str | None:
    identified = record.rec_headers.get_header("WARC-Identified-Payload-Type")
    declared = record.http_headers.get_header("Content-Type") if record.http_headers else record.content_type
    for value in (identified, declared):
        if value and value.split(";")[0].strip().lower() not in ("", "application/octet-stream", "unknown"):
            return value.split(";")[0].strip().lower()
    return None


def _drain(record) -> bool:
    """Read the rest of a record's block; False when it ends before its Content-Length."""
    while record.raw_stream.read(_READ):
        pass
    return getattr(record.raw_stream, "limit", 0) <= 0


class _Walker:
    """The record loop over one decompressed stream (a gzip member, or a whole file)."""

    def __init__(self, path: Path, label: str, limits: Limits, keep_headers: tuple[str, ...]):
        from warcio.recordloader import ArcWarcRecordLoader
        self.loader = ArcWarcRecordLoader(verify_http=False, arc2warc=True)
        self.path, self.label, self.limits, self.keep = path, label, limits, keep_headers
        self.count = 0
        self.current = ""  # the location of the record being read, for damage found mid-record

    def records(self, buf) -> Iterator[WarcItem | Reject]:
        from warcio.exceptions import ArchiveLoadFailed
        from warcio.statusandheaders import StatusAndHeadersParserException
        stream = _Capped(buf)
        seekable = getattr(buf, "seekable", lambda: False)()
        next_line = None
        while True:
            self.count += 1
            self.current = f"{self.label}:{self.count}"
            stream.budget = _HEADER_BUDGET
            start = buf.tell() - len(next_line or b"") if seekable else 0
            try:
                record = self.loader.parse_record_stream(stream, next_line, None)
            except EOFError:
                self.count -= 1
                return
            except (ArchiveLoadFailed, StatusAndHeadersParserException, _HeaderTooLong, ValueError) as e:
                yield Reject(self.current, "warc_bad_header", f"{self.path}: record {self.count}: {e}; "
                                "skipped to the next record", str(next_line or b"")[:200])
                next_line = _skip_to_record(stream)
                if next_line is None:
                    return
                continue
            item = self._item(record)
            short = isinstance(item, Reject) and item.reason == "warc_truncated"
            if seekable and (short or not _at_boundary(buf)):
                end = buf.tell()
                at = _resync(buf, start, end)
                if at is not None:   # its Content-Length swallowed the next record: quarantine it, read that one
                    loc = item.loc if isinstance(item, Reject) else self.current
                    yield Reject(loc, "warc_bad_length", f"{self.path}: record {self.count} (byte {start:,}): its "
                                 f"Content-Length runs past the next record header at byte {at:,}; resumed there")
                    buf.seek(at)
                    next_line = None
                    continue
                buf.seek(end)
            yield item
            self.current = f"{self.label}:{self.count + 1}"  # damage from here on is past that record
            next_line = _blank_lines(stream)
            if next_line is None:
                return

    def _item(self, record) -> WarcItem | Reject:
        h = record.rec_headers
        rid = (h.get_header("WARC-Record-ID") or "").strip().strip("<>")
        loc = self.current = f"{self.label}:{rid}" if rid else self.current
        where = f"{self.path}: record {rid or self.count}"
        kind = record.rec_type
        if kind in _DROPPED:
            return Reject(loc, _DROPPED[kind], quarantine=False) if _drain(record) else self._short(loc, where)
        if kind not in ("response", "resource", "conversion"):
            _drain(record)
            return Reject(loc, "warc_unknown_type", f"{where}: WARC-Type {kind!r} is not a known type")
        if h.get_header("WARC-Segment-Number") or kind == "continuation":
            _drain(record)
            return Reject(loc, "warc_segmented", f"{where}: a segmented record (WARC-Segment-Number); "
                             "reassembly is not supported")
        status = str(record.http_headers.get_statuscode() or "") if record.http_headers and kind == "response" \
            else "200"
        mime = _mime(record)
        if kind != "conversion":
            if not (status.isdigit() and len(status) == 3):
                _drain(record)
                return Reject(loc, "bad_http_headers", f"{where}: HTTP status line is {status!r}")
            if not status.startswith("2"):
                reason = "http_redirect" if str(status).startswith("3") else "http_error"
                return Reject(loc, reason, quarantine=False) if _drain(record) else self._short(loc, where)
            if mime is not None and mime not in HTML_TYPES:
                return Reject(loc, "not_html", quarantine=False) if _drain(record) else self._short(loc, where)
        encoding = (record.http_headers.get_header("Content-Encoding") or "").strip().lower() \
            if record.http_headers else ""
        if encoding not in ("", "identity", "gzip", "x-gzip", "deflate"):
            _drain(record)
            return Reject(loc, "bad_content_encoding", f"{where}: Content-Encoding {encoding!r} is not supported")
        content = record.content_stream()
        payload = read_bounded(content, self.limits.max_record_bytes)
        decoder = getattr(content, "decompressor", None)
        if not _drain(record):
            return self._short(loc, where)
        if isinstance(payload, Oversize):
            return Reject(loc, "record_too_large", f"{where}: payload of {payload.describe(self.limits.max_record_bytes)}",
                             payload.preview.decode("utf-8", "backslashreplace"))
        if encoding and decoder is not None and not decoder.eof:
            return Reject(loc, "bad_content_encoding", f"{where}: the {encoding} payload ends before its end marker")
        if kind != "conversion" and mime is None and not looks_like_html(payload):
            return Reject(loc, "not_html", quarantine=False)
        ctype = record.http_headers.get_header("Content-Type") if record.http_headers else record.content_type
        kept = {name: h.get_header(name) for name in self.keep if h.get_header(name) is not None}
        if h.get_header("WARC-Truncated"):
            kept["warc_truncated"] = h.get_header("WARC-Truncated")
        return WarcItem(rid or loc, h.get_header("WARC-Target-URI"), h.get_header("WARC-Date"), kind, payload,
                        charset_from_content_type(ctype), kept)

    def _short(self, loc: str, where: str) -> Reject:
        return Reject(loc, "warc_truncated", f"{where}: the record ends before its Content-Length; "
                         "the file was cut or its Content-Length is wrong")


def iter_warc_records(path: Path, limits: Limits, label: str,
                      keep_headers: tuple[str, ...] = ()) -> Iterator[WarcItem | Reject]:
    """Every record of a WARC/WET file (plain, per-record or whole-file gzip, zstd) as an item or a
    rejection; see the module docstring for what each kind of record becomes."""
    walker = _Walker(path, label, limits, keep_headers)
    with open_input(path) as fh:
        head = fh.read(16)
        if not head:
            return
        if head.startswith(GZIP_MAGIC):
            yield from _gzip_file(fh, walker, path, limits)
            return
        zstd = head.startswith(ZSTD_MAGIC)
        if not zstd and not head.lstrip().startswith((b"WARC/", b"filedesc://")):
            codec = codec_for(path)
            yield Reject(f"{label}:1", f"not_{codec}" if codec else "not_warc", f"{path}: starts with {head!r}, "
                            "which is neither a WARC record nor gzip/zstd; check that the file is a WARC")
            return
        if not zstd:  # a plain WARC, whatever its name says (warcio reads by content too)
            fh.seek(0)
            yield from _one_stream(fh, walker)
            return
    try:
        with open_bounded(path, limits, "zstd") as stream:
            yield from _one_stream(stream, walker)
    except InputDamage as e:
        yield Reject(walker.current, e.reason, e.detail)


def _one_stream(stream, walker: _Walker) -> Iterator[WarcItem | Reject]:
    try:
        yield from walker.records(stream)
    except InputDamage as e:
        yield Reject(walker.current, e.reason, e.detail)


def _gzip_file(fh, walker: _Walker, path: Path, limits: Limits) -> Iterator[WarcItem | Reject]:
    totals = [0]  # bytes decompressed from the whole file
    pos = 0
    while True:
        fh.seek(pos)
        head = fh.read(3)
        if not head:
            return
        if head != GZIP_MAGIC + b"\x08":
            nxt = next_member(fh, pos)
            if head.strip(b"\0") or nxt is not None:
                yield Reject(f"{walker.label}@{pos}", "corrupt_gzip", f"{path}: bytes {pos:,}.. are not a gzip "
                                f"member; {'resumed at byte ' + format(nxt, ',') if nxt else 'the rest is skipped'}")
            if nxt is None:
                return
            pos = nxt
            continue
        member = Member(fh, pos, totals, limits, str(path))
        buf = io.BufferedReader(member, buffer_size=_READ)
        try:
            yield from walker.records(buf)
            while member.end is None and buf.read(_READ):
                pass
        except InputDamage as e:
            yield Reject(walker.current, e.reason, e.detail)
            nxt = next_member(fh, pos + 1)
            if nxt is None:
                return
            pos = nxt
            continue
        pos = member.end if member.end is not None else fh.tell()
