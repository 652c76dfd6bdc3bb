"""Small HTML pages and WARC files built for the web-reader tests (warcio writes the WARCs)."""
from __future__ import annotations

import gzip
import io
import zlib
from pathlib import Path

from warcio.statusandheaders import StatusAndHeaders
from warcio.warcwriter import WARCWriter

PARAS = [
    "The river town keeps a small library where volunteers sort donated books every week, and the "
    "reading room stays open late on Thursdays for students who need a quiet place to work.",
    "Visitors often ask about the history of the old mill. The staff answer with stories about the "
    "flood of the spring, the families who rebuilt the wheel, and the baker who kept the bread coming.",
    "Last year the council voted to repair the bridge near the mill, and the work is expected to finish "
    "before the autumn fair, when the square fills with stalls of apples, cheese and honey.",
]


def article(title: str, paras: list[str] = PARAS, *, charset: str | None = "utf-8", http_equiv: bool = False) -> str:
    """A news-like page: navigation and footer boilerplate around an article of `paras`."""
    meta = ""
    if charset and http_equiv:
        meta = f'<meta http-equiv="Content-Type" content="text/html; charset={charset}">'
    elif charset:
        meta = f'<meta charset="{charset}">'
    body = "".join(f"<p>{p}</p>" for p in paras)
    return (f"<!DOCTYPE html><html><head>{meta}<title>{title}</title></head><body>"
            "<nav><a href='/'>Home</a> | <a href='/news'>News</a> | <a href='/login'>Log in</a></nav>"
            f"<article><h1>{title}</h1>{body}</article>"
            "<footer>Copyright 2024 Example Media. All rights reserved. Privacy | Cookies</footer></body></html>")


def _headers(rid: str, date: str = "2024-05-18T01:58:10Z", **extra) -> dict:
    return {"WARC-Record-ID": f"<urn:uuid:{rid}>", "WARC-Date": date, **extra}


def response(writer: WARCWriter, rid: str, url: str, body: bytes, *, ctype: str = "text/html; charset=utf-8",
             status: str = "200 OK", extra_http: list | None = None, warc_extra: dict | None = None) -> None:
    http = StatusAndHeaders(status, [("Content-Type", ctype), *(extra_http or [])], protocol="HTTP/1.1")
    writer.write_record(writer.create_warc_record(url, "response", payload=io.BytesIO(body), http_headers=http,
                                                  warc_headers_dict=_headers(rid, **(warc_extra or {}))))


def chunked(body: bytes, size: int = 100) -> bytes:
    """`body` in HTTP/1.1 chunked transfer encoding."""
    parts = [b"%x\r\n%s\r\n" % (len(body[i:i + size]), body[i:i + size]) for i in range(0, len(body), size)]
    return b"".join(parts) + b"0\r\n\r\n"


def crawl(path: Path, *, gz: bool) -> Path:
    """A WARC like a crawler's: warcinfo, request/response pairs, a chunked and a gzip-encoded response,
    a PNG, a 404 and a redirect, a revisit, a metadata record and a WET-style conversion record."""
    buf = io.BytesIO()
    w = WARCWriter(buf, gzip=gz)
    w.write_record(w.create_warcinfo_record(path.name, {"software": "curate-tests", "format": "WARC File Format 1.0"}))
    req = StatusAndHeaders("GET /a HTTP/1.1", [("Host", "news.example")], is_http_request=True)
    w.write_record(w.create_warc_record("https://news.example/a", "request", http_headers=req,
                                        warc_headers_dict=_headers("req-a")))
    response(w, "resp-a", "https://news.example/a", article("Mill bridge").encode())
    response(w, "resp-chunked", "https://news.example/b", chunked(article("Library nights").encode()),
             extra_http=[("Transfer-Encoding", "chunked")])
    response(w, "resp-gzip", "https://news.example/c", gzip.compress(article("Autumn fair").encode(), mtime=0),
             extra_http=[("Content-Encoding", "gzip")])
    both = chunked(gzip.compress(article("Both encodings").encode(), mtime=0), 64)
    response(w, "resp-both", "https://news.example/d", both,
             extra_http=[("Content-Encoding", "gzip"), ("Transfer-Encoding", "chunked")])
    response(w, "resp-png", "https://news.example/logo.png", b"\x89PNG\r\n\x1a\n" + bytes(200), ctype="image/png")
    response(w, "resp-404", "https://news.example/missing", b"<html><body>Not found</body></html>",
             status="404 Not Found")
    response(w, "resp-301", "https://news.example/old", b"", status="301 Moved Permanently",
             extra_http=[("Location", "https://news.example/a")])
    revisit = w.create_revisit_record("https://news.example/a", "sha1:AAAA", "https://news.example/a",
                                      "2024-05-17T01:00:00Z", warc_headers_dict=_headers("revisit-a"))
    w.write_record(revisit)
    w.write_record(w.create_warc_record("https://news.example/a", "metadata", payload=io.BytesIO(b"fetchTimeMs: 12\r\n"),
                                        warc_content_type="application/warc-fields",
                                        warc_headers_dict=_headers("meta-a")))
    text = "Mill bridge\n" + "\n".join(PARAS)
    w.write_record(w.create_warc_record("https://news.example/a", "conversion", payload=io.BytesIO(text.encode()),
                                        warc_content_type="text/plain", warc_headers_dict=_headers("wet-a")))
    path.write_bytes(buf.getvalue())
    return path


CRAWL_DOCUMENTS = ["urn:uuid:resp-a", "urn:uuid:resp-chunked", "urn:uuid:resp-gzip", "urn:uuid:resp-both",
                   "urn:uuid:wet-a"]
CRAWL_DROPS = {"warc_warcinfo": 1, "warc_request": 1, "not_html": 1, "http_error": 1, "http_redirect": 1,
               "warc_revisit": 1, "warc_metadata": 1}


def members(data: bytes) -> list[tuple[int, int]]:
    """`(start, end)` of each gzip member of a per-record gzip WARC."""
    out, pos = [], 0
    while pos < len(data):
        d = zlib.decompressobj(31)
        d.decompress(data[pos:])
        end = len(data) - len(d.unused_data)
        out.append((pos, end))
        pos = end
    return out
