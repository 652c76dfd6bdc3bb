"""Build the demo's WARC source `corpus/web_warc/crawl-00000.warc.gz` from trafilatura's evaluation
corpus (`../shared/data/web_text/html_pages_trafilatura_eval.tar.gz`, Apache-2.0 test corpus; page
contents remain their sites' work): English-language pages as a crawler would have stored them, one
gzip member per record (as Common Crawl publishes WARCs), each response preceded by its request, plus
one revisit record (a page fetched again unchanged) and one non-HTML response, so the demo shows what
`input.format: warc` reads, extracts and counts. Deterministic: fixed dates and record ids.

    python recipes/demo/build_warc.py
"""
from __future__ import annotations

import hashlib
import io
import json
import tarfile
import uuid
from pathlib import Path

from warcio.statusandheaders import StatusAndHeaders
from warcio.warcwriter import WARCWriter

HERE = Path(__file__).resolve().parent
SHARED = HERE.parents[2] / "shared" / "data" / "web_text" / "html_pages_trafilatura_eval.tar.gz"
OUT = HERE / "corpus" / "web_warc" / "crawl-00000.warc.gz"
PAGES = 24
DATE = "2024-05-20T10:{:02d}:00Z"


def _english(url: str, html: bytes) -> bool:
    if not url.startswith(("http://", "https://")):   # some index rows hold names, not URLs
        return False
    head = html[:4000].lower()
    return (b'lang="en' in head or b"lang='en" in head) and not url.split("/")[2].endswith((".de", ".at", ".ch"))


def _id(n: int, kind: str) -> str:
    return f"<urn:uuid:{uuid.UUID(hashlib.sha256(f'curate-demo-{kind}-{n}'.encode()).hexdigest()[:32])}>"


def main() -> None:
    with tarfile.open(SHARED) as tar:
        index = [json.loads(line) for line in tar.extractfile("index.jsonl").read().splitlines()]
        pages = []
        for entry in sorted(index, key=lambda e: e["url"]):
            member = tar.getmember(entry["file"])
            html = tar.extractfile(member).read()
            if _english(entry["url"], html):
                pages.append((entry["url"], html))
            if len(pages) == PAGES:
                break
    OUT.parent.mkdir(parents=True, exist_ok=True)
    buf = io.BytesIO()
    writer = WARCWriter(buf, gzip=True)
    for n, (url, html) in enumerate(pages):
        date = DATE.format(n)
        request = writer.create_warc_record(url, "request", payload=io.BytesIO(b""), warc_headers_dict={
            "WARC-Date": date, "WARC-Record-ID": _id(n, "request")},
            http_headers=StatusAndHeaders(f"GET /{url.split('/', 3)[-1]} HTTP/1.1",
                                          [("Host", url.split("/")[2])], is_http_request=True))
        writer.write_record(request)
        response = writer.create_warc_record(url, "response", payload=io.BytesIO(html), warc_headers_dict={
            "WARC-Date": date, "WARC-Record-ID": _id(n, "response")},
            http_headers=StatusAndHeaders("200 OK", [("Content-Type", "text/html"),
                                                     ("Content-Length", str(len(html)))], protocol="HTTP/1.1"))
        writer.write_record(response)
    url0 = pages[0][0]   # the first page fetched again, unchanged: a revisit record, nothing to extract
    writer.write_record(writer.create_warc_record(url0, "revisit", payload=io.BytesIO(b""), warc_headers_dict={
        "WARC-Date": DATE.format(59), "WARC-Record-ID": _id(0, "revisit"),
        "WARC-Profile": "http://netpreserve.org/warc/1.0/revisit/identical-payload-digest",
        "WARC-Refers-To": _id(0, "response")}))
    png = url0.rsplit("/", 1)[0] + "/logo.png"   # a non-HTML response: counted, not read as text
    writer.write_record(writer.create_warc_record(png, "response", payload=io.BytesIO(b"\x89PNG\r\n\x1a\n"),
                        warc_headers_dict={"WARC-Date": DATE.format(58), "WARC-Record-ID": _id(1, "image")},
                        http_headers=StatusAndHeaders("200 OK", [("Content-Type", "image/png")],
                                                      protocol="HTTP/1.1")))
    OUT.write_bytes(buf.getvalue())
    print(f"wrote {OUT} ({len(pages)} pages, {OUT.stat().st_size:,} bytes)")


if __name__ == "__main__":
    main()
