"""Build the acquisition demo's inputs from the demo corpus's C4 documents (ODC-BY 1.0):

    site/page-NN.html                 8 pages that serve.py serves on 127.0.0.2:18765 (the URL list)
    dump.tar.gz                       8 documents in two JSONL files (the archive source)
    hub/snapshots/<rev>/*.parquet     7 documents as a dataset snapshot (the fsspec source)

Deterministic: fixed tar/gzip timestamps and member order, the snapshot revision is the sha1 of
its content. Run: python recipes/acquisition/build.py
"""
from __future__ import annotations

import gzip
import hashlib
import html
import io
import json
import tarfile
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

HERE = Path(__file__).resolve().parent
CORPUS = HERE.parent / "demo" / "corpus" / "c4_en" / "part-00000.jsonl.gz"


def main() -> None:
    docs = [json.loads(line) for line in gzip.open(CORPUS, "rt", encoding="utf-8")]
    docs = [d for d in docs if not d["id"].endswith("-recrawl")][:23]
    site, dump, hub = docs[:8], docs[8:16], docs[16:]
    (HERE / "site").mkdir(exist_ok=True)
    for i, d in enumerate(site):
        paragraphs = "".join(f"<p>{html.escape(p)}</p>" for p in d["text"].split("\n") if p.strip())
        (HERE / "site" / f"page-{i:02d}.html").write_text(
            f"<!doctype html>\n<html><head><title>{html.escape(d['id'])}</title></head><body><nav>Home | About"
            f"</nav><article>{paragraphs}</article><footer>Source: {html.escape(d['url'])}</footer></body></html>\n",
            encoding="utf-8")
    buf = io.BytesIO()
    with gzip.GzipFile(fileobj=buf, mode="wb", mtime=0) as gz, tarfile.open(fileobj=gz, mode="w") as tar:
        for name, part in (("data/part-0.jsonl", dump[:4]), ("data/part-1.jsonl", dump[4:])):
            data = "".join(json.dumps({"id": d["id"], "text": d["text"], "url": d["url"],
                                       "license": "ODC-BY-1.0"}) + "\n" for d in part).encode()
            info = tarfile.TarInfo(name)
            info.size, info.mtime, info.mode = len(data), 0, 0o644
            tar.addfile(info, io.BytesIO(data))
    (HERE / "dump.tar.gz").write_bytes(buf.getvalue())
    table = pa.table({"id": [d["id"] for d in hub], "text": [d["text"] for d in hub],
                      "url": [d["url"] for d in hub]})
    sink = pa.BufferOutputStream()
    pq.write_table(table, sink)
    revision = hashlib.sha1(sink.getvalue().to_pybytes()).hexdigest()
    folder = HERE / "hub" / "snapshots" / revision
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "train-00000.parquet").write_bytes(sink.getvalue().to_pybytes())
    print(f"snapshot revision {revision}")


if __name__ == "__main__":
    main()
