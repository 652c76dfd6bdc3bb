"""HTML pages: single files (`.html`, `.htm`, `.xhtml`, also gzip/zstd-compressed) and tars of them.

`iter_html_pages(path, limits, label, pages, fields)` yields an `HtmlPage` per page and a `Reject`
for every other unit. Where a page's URL and fields come from (see `curation.recipe.reading.Pages`):
- a file `p.html` (or `p.html.gz`): the sidecar `p.json` (an object) or `p.url` (the URL) beside it;
- a tar member: a sidecar member of the same stem (members are grouped by stem, in any order, as long
  as a page and its sidecars are adjacent, as in a sorted tar or a WebDataset), or a row of the index
  member (`pages.index`, a JSON-lines file listing `{index_key: member path, url_field: ..., ...}`),
  which must come before the pages it lists: an index found after pages is `misplaced_index`.
Units and reasons: a page over `max_record_bytes` (`record_too_large`) or damaged in its compression
(`not_gzip`, `truncated_gzip`, ...), an unreadable sidecar (`bad_sidecar`: its page is quarantined, as
a page without its URL would escape the opt-out), a sidecar without its page (`orphan_sidecar`), a tar
member that is a link or device (`not_a_regular_file`), a damaged tar (`corrupt_tar`: the rest of it)
are quarantined; a member or file that is not HTML (stylesheets, images; by name, else by sniffing its
first bytes) is dropped as `not_html`, and a sidecar file given as an input beside its page as
`html_sidecar`. Tars are read as streams, one member at a time.
"""
from __future__ import annotations

import json
import tarfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

from curation.recipe.reading import Pages
from curation.steps.base import Reject
from curation.steps.text.readers.extract import looks_like_html
from curation.steps.text.readers.inputs import (
    InputDamage,
    Limits,
    Oversize,
    codec_for,
    decompressing,
    iter_lines,
    open_bounded,
    read_bounded,
)

PAGE_SUFFIXES = (".html", ".htm", ".xhtml", ".shtml")
SIDECAR_SUFFIXES = (".json", ".url")
_NOT_PAGES = (".css", ".js", ".png", ".jpg", ".jpeg", ".gif", ".svg", ".webp", ".ico", ".woff", ".woff2",
              ".pdf", ".txt", ".xml", ".map")
_SIDECAR_CAP = 1 << 20


@dataclass(frozen=True, slots=True)
class HtmlPage:
    """A page's raw bytes, where it was found (`loc`: `<shard>` or `<shard>:<member>`), its URL and the
    sidecar/index fields the recipe keeps."""
    loc: str
    payload: bytes
    url: str | None = None
    fields: dict = field(default_factory=dict)


def _split(name: str) -> tuple[str, str, str | None]:
    """`(stem, kind, codec)`: kind is `page`, `sidecar`, `tar` or `other` (by name alone)."""
    low = name.lower()
    codec = codec_for(low)
    base = low.rsplit(".", 1)[0] if codec else low
    cut = len(name) - (len(low) - len(base))
    if base.endswith((".tar", ".tgz")) or low.endswith(".tgz"):
        return name, "tar", codec
    for suffix in PAGE_SUFFIXES:
        if base.endswith(suffix):
            return name[:cut - len(suffix)], "page", codec
    for suffix in SIDECAR_SUFFIXES:
        if low.endswith(suffix):
            return name[:-len(suffix)], "sidecar", None
    return name, "other", codec


def _sidecar(data: bytes, suffix: str, pages: Pages, keep: tuple[str, ...]) -> tuple[str | None, dict]:
    """`(url, fields)` from a sidecar's bytes; raises ValueError when it cannot be read."""
    text = data.decode("utf-8-sig")
    if suffix == ".url":
        return (text.strip().splitlines() or [None])[0], {}
    obj = json.loads(text)
    if not isinstance(obj, dict):
        raise ValueError(f"expected a JSON object, got {type(obj).__name__}")
    url = obj.get(pages.url_field)
    return (url if isinstance(url, str) else None), {k: obj[k] for k in keep if k in obj}


def _page_bytes(raw, codec: str | None, limits: Limits, what: str) -> bytes | Oversize:
    stream = decompressing(raw, codec, limits, what) if codec else raw
    return read_bounded(stream, limits.max_record_bytes)


def _check(loc: str, data: bytes | Oversize, what: str, limits: Limits) -> Reject | None:
    if isinstance(data, Oversize):
        return Reject(loc, "record_too_large", f"{what}: {data.describe(limits.max_record_bytes)}",
                         data.preview.decode("utf-8", "backslashreplace"))
    return None


def iter_html_pages(path: Path, limits: Limits, label: str, pages: Pages | None = None,
                    keep: tuple[str, ...] = ()) -> Iterator[HtmlPage | Reject]:
    """The pages of one input file (a page, or a tar of pages) with their URLs and kept fields."""
    pages = pages or Pages()
    stem, kind, _ = _split(path.name)
    if kind == "tar":
        yield from _tar_pages(path, limits, label, pages, keep)
        return
    if kind == "sidecar":
        siblings = [p for p in path.parent.glob(f"{stem}.*") if _split(p.name)[1] == "page"]
        yield (Reject(label, "html_sidecar", quarantine=False) if siblings else
               Reject(label, "not_html", f"{path}: a sidecar without its page; list pages in input.paths"))
        return
    try:
        with open_bounded(path, limits) as raw:
            data = read_bounded(raw, limits.max_record_bytes)
    except InputDamage as e:
        yield Reject(label, e.reason, e.detail)
        return
    if (bad := _check(label, data, str(path), limits)) is not None:
        yield bad
        return
    if kind == "other" and not looks_like_html(data):
        yield Reject(label, "not_html", quarantine=False)
        return
    url, fields = None, {}
    for suffix in SIDECAR_SUFFIXES:
        side = path.parent / f"{stem}{suffix}"
        if side.is_file():
            try:
                with open(side, "rb") as f:
                    url, fields = _sidecar(f.read(_SIDECAR_CAP), suffix, pages, keep)
            except (ValueError, UnicodeDecodeError) as e:
                yield Reject(label, "bad_sidecar", f"{side}: {e}; fix or remove the sidecar")
                return
            break
    yield HtmlPage(label, data, url, fields)


def _index_rows(stream, limits: Limits, pages: Pages, keep: tuple[str, ...], where: str):
    """`{member path: (url, fields)}` from an index member, and the rejections of its bad rows."""
    rows, bad = {}, []
    for lineno, line in iter_lines(stream, limits.max_record_bytes):
        if isinstance(line, Oversize) or not line.strip():
            if isinstance(line, Oversize):
                bad.append(Reject(f"{where}:{lineno}", "bad_index_row", f"{where} line {lineno}: "
                                     f"{line.describe(limits.max_record_bytes)}"))
            continue
        try:
            obj = json.loads(line.decode("utf-8-sig"))
            key = obj[pages.index_key]
        except (ValueError, UnicodeDecodeError, KeyError, TypeError) as e:
            bad.append(Reject(f"{where}:{lineno}", "bad_index_row", f"{where} line {lineno}: {e!r}",
                                 line[:200].decode("utf-8", "backslashreplace")))
            continue
        url = obj.get(pages.url_field)
        rows[str(key)] = (url if isinstance(url, str) else None, {k: obj[k] for k in keep if k in obj})
    return rows, bad


def _tar_pages(path: Path, limits: Limits, label: str, pages: Pages,
               keep: tuple[str, ...]) -> Iterator[HtmlPage | Reject]:
    index: dict[str, tuple] = {}
    group: dict = {"stem": None}    # the members of one stem: its page and its sidecars

    def flush() -> Iterator[HtmlPage | Reject]:
        stem, page, sides = group.get("stem"), group.get("page"), group.get("sides", [])
        group.clear()
        group["stem"] = None
        if stem is None:
            return
        if page is None:
            for name, _ in sides:
                yield Reject(f"{label}:{name}", "orphan_sidecar", f"{path}: member {name} has no page beside "
                                "it; keep a page and its sidecars adjacent in the tar")
            return
        name, data = page
        url, fields = index.get(name, (None, {}))
        for side_name, side_data in sides:
            try:
                url, fields = _sidecar(side_data, PurePosixPath(side_name).suffix.lower(), pages, keep)
            except (ValueError, UnicodeDecodeError) as e:
                yield Reject(f"{label}:{name}", "bad_sidecar", f"{path}: member {side_name}: {e}")
                return
        yield HtmlPage(f"{label}:{name}", data, url, fields)

    seen_page = False
    name = ""
    try:
        with open_bounded(path, limits) as raw, tarfile.open(fileobj=raw, mode="r|") as tf:
            for member in tf:
                name = member.name
                if member.isdir():
                    continue
                loc = f"{label}:{name}"
                if not member.isfile():
                    yield Reject(loc, "not_a_regular_file", f"{path}: member {name} is a link or device; not read")
                    continue
                base = PurePosixPath(name).name
                if base == pages.index:
                    rows, bad = _index_rows(tf.extractfile(member), limits, pages, keep, f"{path}:{name}")
                    index.update(rows)
                    yield from bad
                    if seen_page:
                        yield Reject(loc, "misplaced_index", f"{path}: index member {name} comes after pages, "
                                        "whose URLs it could not give; put the index first in the tar")
                    continue
                stem, kind, codec = _split(name)
                if stem != group["stem"] or (kind != "sidecar" and "page" in group):
                    yield from flush()
                    group["stem"] = stem
                if kind == "sidecar":
                    group.setdefault("sides", []).append((name, tf.extractfile(member).read(_SIDECAR_CAP)))
                    continue
                if kind == "tar" or base.lower().endswith(_NOT_PAGES):
                    yield Reject(loc, "not_html", quarantine=False)
                    continue
                try:
                    data = _page_bytes(tf.extractfile(member), codec, limits, f"{path}:{name}")
                except InputDamage as e:
                    if e.source != f"{path}:{name}":
                        raise  # the tar's own stream broke: the rest of the tar is one unit
                    yield Reject(loc, e.reason, e.detail)
                    continue
                if (bad := _check(loc, data, f"{path}:{name}", limits)) is not None:
                    yield bad
                    continue
                if kind == "other" and not looks_like_html(data):
                    yield Reject(loc, "not_html", quarantine=False)
                    continue
                seen_page = True
                group["page"] = (name, data)
            yield from flush()
    except InputDamage as e:
        yield from flush()
        yield Reject(f"{label}:{name or 0}", e.reason, e.detail)
    except tarfile.TarError as e:
        yield from flush()
        yield Reject(f"{label}:{name or 0}", "corrupt_tar", f"{path}: unreadable after member {name or '-'} "
                        f"({e}); re-fetch the file")
