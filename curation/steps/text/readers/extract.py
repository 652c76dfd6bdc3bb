"""The main text of an HTML page: its bytes decoded with the right charset, then trafilatura.

Charset, in the order HTML's own decoding rules give (WHATWG "determining the character encoding"):
1. a byte-order mark (UTF-8, UTF-16 LE/BE) wins over everything;
2. the charset of the HTTP `Content-Type` header (WARC responses);
3. a `<meta charset=...>` or `<meta http-equiv="Content-Type" content="...; charset=...">` in the first
   4 KiB (an XML declaration's `encoding=` counts too);
4. strict UTF-8 (bytes that decode as UTF-8 almost never are anything else);
5. charset-normalizer's best guess;
and a declared charset that the bytes contradict (a strict decode fails) falls through to the next
step. A declared charset that decodes strictly, but into a text charset-normalizer rejects or scores
far messier than its own best match (UTF-8 bytes labelled `shift_jis` decode as cp932 mojibake), is
overridden by that match; the record keeps the overridden label in `meta.charset_override`. Labels are mapped as browsers map them: `iso-8859-1`/`latin1`/`ascii` to windows-1252, `gb2312`/
`gbk` to gb18030, `shift_jis` to cp932, `euc-kr` to cp949; a page that declares UTF-16 without a BOM is
read as UTF-8. When nothing decodes strictly, the best candidate decodes with U+FFFD replacements and
the record says so (`charset: "<name>+replace"`).

trafilatura is not given the bytes: its own decoding ignores `<meta charset>` and decompresses gzip,
zstd and brotli payloads without a size limit. Its `deduplicate` option is off, as it keeps a
process-wide cache whose state depends on which pages a worker saw before (outputs would depend on
the worker count), and its input size limit is raised to `max_record_bytes` (the reader enforces it).
"""
from __future__ import annotations

import codecs
import re
from functools import lru_cache

from curation.recipe.reading import Extract

_BOMS = ((codecs.BOM_UTF8, "utf-8"), (codecs.BOM_UTF16_LE, "utf-16-le"), (codecs.BOM_UTF16_BE, "utf-16-be"))
_META = re.compile(rb"""<meta[^>]+?charset\s*=\s*["']?\s*([a-zA-Z0-9_.:\-]+)""", re.IGNORECASE)
_XML = re.compile(rb"""^\s*<\?xml[^>]+encoding\s*=\s*["']([a-zA-Z0-9_.:\-]+)""", re.IGNORECASE)
_CT_CHARSET = re.compile(r"""charset\s*=\s*["']?\s*([a-zA-Z0-9_.:\-]+)""", re.IGNORECASE)
# labels browsers decode with a superset codec
_ALIASES = {"iso-8859-1": "cp1252", "iso8859-1": "cp1252", "latin1": "cp1252", "latin-1": "cp1252",
            "l1": "cp1252", "us-ascii": "cp1252", "ascii": "cp1252", "windows-1252": "cp1252",
            "gb2312": "gb18030", "gbk": "gb18030", "x-gbk": "gb18030", "gb_2312-80": "gb18030",
            "shift_jis": "cp932", "shift-jis": "cp932", "sjis": "cp932", "x-sjis": "cp932", "ms_kanji": "cp932",
            "windows-31j": "cp932", "euc-kr": "cp949", "ks_c_5601-1987": "cp949", "iso-8859-9": "cp1254",
            "iso-8859-11": "cp874", "tis-620": "cp874", "utf8": "utf-8", "unicode-1-1-utf-8": "utf-8"}


def _codec(label: str | bytes | None) -> str | None:
    """A Python codec for an encoding label, or None when it names nothing usable."""
    if not label:
        return None
    if isinstance(label, bytes):
        label = label.decode("ascii", "ignore")
    label = label.strip().lower()
    label = _ALIASES.get(label, label)
    if label.startswith(("utf-16", "utf16", "utf-32")):
        return "utf-8"  # a declaration read from ASCII-compatible bytes cannot be UTF-16 (WHATWG)
    try:
        return codecs.lookup(label).name
    except LookupError:
        return None


_HTML_SNIFF = re.compile(rb"<(!doctype\s+html|html|head|body|title|meta|p|div)[\s>/]", re.IGNORECASE)


def looks_like_html(data: bytes) -> bool:
    """Whether a payload without a usable content type is HTML (a tag among its first 4 KiB)."""
    return _HTML_SNIFF.search(data[:4096]) is not None


def charset_from_content_type(value: str | None) -> str | None:
    """The charset parameter of a `Content-Type` header value, as written."""
    m = _CT_CHARSET.search(value or "")
    return m.group(1) if m else None


def declared_charset(data: bytes) -> str | None:
    """The charset a page declares in its first 4 KiB (`<meta>` or an XML declaration)."""
    head = data[:4096]
    m = _XML.search(head) or _META.search(head)
    return m.group(1).decode("ascii", "ignore") if m else None


def decode_html(data: bytes, http_charset: str | None = None) -> tuple[str, str]:
    """`(text, charset used)`; the charset ends in `+replace` when no candidate decoded strictly."""
    text, name, _ = decode_page(data, http_charset)
    return text, name


def decode_page(data: bytes, http_charset: str | None = None) -> tuple[str, str, str | None]:
    """`(text, charset used, declared charset overridden or None)` (see `decode_html`)."""
    for bom, name in _BOMS:
        if data.startswith(bom):
            return data[len(bom):].decode(name, "replace"), name, None
    declared = [_codec(http_charset), _codec(declared_charset(data))]
    candidates = [*declared, "utf-8"]
    tried: list[str] = []
    for name in candidates:
        if name is None or name in tried:
            continue
        tried.append(name)
        try:
            text = data.decode(name)
        except UnicodeDecodeError:
            continue
        if name in declared and (better := _likelier(data, name, text)) is not None:
            return data.decode(better), better, name
        return text, name, None
    guess = _detect(data)
    if guess is not None and guess not in tried:
        try:
            return data.decode(guess), guess, None
        except (UnicodeDecodeError, LookupError):
            pass
    name = guess or next(n for n in candidates if n is not None)
    return data.decode(name, "replace"), f"{name}+replace", None


def _detect(data: bytes) -> str | None:
    from charset_normalizer import from_bytes
    best = from_bytes(data[:65536]).best() if len(data) > 65536 else from_bytes(data).best()
    return _codec(best.encoding) if best is not None else None


# how much more mess (charset-normalizer's chaos, 0-1) the declared decoding must show than the detected
# one to be overridden, when the detector still lists it
_OVERRIDE_MARGIN = 0.1


def _likelier(data: bytes, declared: str, text: str) -> str | None:
    """The charset to use instead of a declared one that decoded strictly, or None to keep it.

    A lying multi-byte label (UTF-8 bytes sent as `shift_jis`, `euc-kr`, `gb2312`, or as `windows-1251`)
    often still decodes strictly, into mojibake. charset-normalizer's best match wins when the declared
    charset is not among the charsets that give the same text, and the detector either rejected the
    declared one (its decoding is too messy to list) or scores it `_OVERRIDE_MARGIN` messier, and its
    text differs. UTF-8 and pure ASCII are never second-guessed; an honest label (the detector agrees,
    cannot tell, or names a codec that gives the same text) is kept."""
    if declared == "utf-8" or data.isascii():
        return None
    from charset_normalizer import from_bytes
    matches = from_bytes(data[:65536] if len(data) > 65536 else data)
    best = matches.best()
    if best is None:
        return None
    def codecs_of(match) -> set[str | None]:   # its names as browsers map them (`latin_1` is windows-1252)
        return {_codec(n.replace("_", "-")) for n in match.could_be_from_charset}

    if declared in codecs_of(best):
        return None
    mine = next((m for m in matches if declared in codecs_of(m)), None)
    if mine is not None and mine.chaos - best.chaos < _OVERRIDE_MARGIN:
        return None
    guess = _codec(best.encoding.replace("_", "-"))
    try:
        other = data.decode(guess)
    except (UnicodeDecodeError, LookupError, TypeError):
        return None   # the detector read a sample; the whole page must decode strictly too
    return None if other == text else guess   # a superset codec of the same text (cp949 of euc_kr) is no lie


@lru_cache(maxsize=8)
def _config(max_bytes: int):
    from trafilatura.settings import use_config
    config = use_config()
    config.set("DEFAULT", "MAX_FILE_SIZE", str(max_bytes))
    return config


def extract_main_text(html: str, url: str | None, settings: Extract, max_bytes: int) -> str | None:
    """The page's main text (paragraphs separated by newlines), or None when trafilatura finds none."""
    import trafilatura
    text = trafilatura.extract(
        html, url=url, favor_precision=settings.favor == "precision", favor_recall=settings.favor == "recall",
        include_tables=settings.include_tables, include_comments=settings.include_comments,
        no_fallback=not settings.fallback, deduplicate=False, output_format="txt",
        config=_config(max(max_bytes, 1)))
    return text if text and text.strip() else None
