"""Rebuild the demo classifiers' training data under recipes/classifiers/demo/ (run once, output committed).

- `positives/articles.jsonl.gz`: human-checked main text of news articles: the expected parser output
  of flairNLP/fundus's test data (MIT; ~180 publishers in 41 countries, so many languages, few
  documents each) and the ground-truth article bodies of scrapinghub/article-extraction-benchmark
  (MIT; English). Fields: id, text, url (where known), country (fundus).
- `toxicity/comments.jsonl`: a labelled set written for this demo (no third-party text): short
  English and German comments, `label` toxic or clean, `language`. The toxic ones are mild insults
  built from a few phrase lists; the clean ones include disagreement and criticism without insults,
  so that the model has to learn more than "negative". It demonstrates the training path; it is far
  too small and too regular to filter real data.

The negative candidates of the quality demo are the demo corpus itself (recipes/demo/corpus).

Usage: python recipes/classifiers/build_data.py [--shared ../shared/data]
"""
from __future__ import annotations

import argparse
import gzip
import hashlib
import io
import itertools
import json
import tarfile
from pathlib import Path

HERE = Path(__file__).parent / "demo"


def write_gz(path: Path, rows: list[dict]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    buf = io.BytesIO()
    with gzip.GzipFile(fileobj=buf, mode="wb", mtime=0) as gz:
        for r in rows:
            gz.write((json.dumps(r, ensure_ascii=False, sort_keys=True) + "\n").encode())
    path.write_bytes(buf.getvalue())
    print(f"{path}: {len(rows)} rows, {path.stat().st_size:,} bytes")


def positives(shared: Path) -> list[dict]:
    rows = []
    for i, r in enumerate(json.loads(line) for line in gzip.open(shared / "news_articles_fundus_extracted.jsonl.gz", "rt")):
        if r.get("text", "").strip():
            rows.append({"id": f"fundus-{i:04d}", "text": r["text"], "country": r["country"]})
    with tarfile.open(shared / "html_pages_article_extraction_benchmark.tar") as tar:
        f = tar.extractfile("ground_truth.jsonl")
        for r in (json.loads(line) for line in f):
            if (r.get("article_body") or "").strip():
                rows.append({"id": f"aeb-{r['id'][:16]}", "text": r["article_body"], "url": r["url"]})
    return rows


_EN_TOXIC = (["You are", "Honestly, you are", "Everyone can see you are", "Face it, you are"],
             ["a pathetic", "a worthless", "a brainless", "a disgusting", "an utterly useless"],
             ["idiot,", "loser,", "clown,", "moron,", "troll,"],
             ["and nobody wants you here.", "so shut up.", "get lost.", "go crawl back under your rock."])
_DE_TOXIC = (["Du bist", "Ehrlich, du bist", "Jeder sieht, du bist", "Gib es zu, du bist"],
             ["ein erbärmlicher", "ein wertloser", "ein hirnloser", "ein widerlicher", "ein völlig nutzloser"],
             ["Idiot,", "Versager,", "Clown,", "Vollidiot,", "Troll,"],
             ["und keiner will dich hier.", "also halt die Klappe.", "verschwinde.", "kriech zurück unter deinen Stein."])
_EN_CLEAN = (["Thanks for", "I appreciate", "Good points in", "I disagree with parts of", "I am not convinced by"],
             ["the article", "this explanation", "your summary", "the report", "the second section"],
             ["the numbers from 2019 tell a different story.", "it would help to cite the source.",
              "the argument about costs is clear.", "I learned something new today.",
              "the conclusion goes further than the data."])
_DE_CLEAN = (["Danke für", "Ich schätze", "Gute Punkte in", "Ich widerspreche Teilen von", "Mich überzeugt nicht ganz"],
             ["den Artikel", "diese Erklärung", "deine Zusammenfassung", "den Bericht", "den zweiten Abschnitt"],
             ["die Zahlen von 2019 erzählen etwas anderes.", "eine Quelle wäre hilfreich.",
              "das Argument zu den Kosten ist klar.", "ich habe heute etwas gelernt.",
              "das Fazit geht weiter als die Daten."])


def _pick(parts: tuple, n: int, salt: str) -> list[str]:
    """n phrases out of the product of `parts`, chosen by hash (fixed, spread over every list)."""
    combos = [" ".join(c) for c in itertools.product(*parts)]
    combos.sort(key=lambda s: hashlib.sha256((salt + s).encode()).hexdigest())
    return combos[:n]


def toxicity() -> list[dict]:
    rows = []
    for lang, tox, clean in (("en", _EN_TOXIC, _EN_CLEAN), ("de", _DE_TOXIC, _DE_CLEAN)):
        rows += [{"text": t, "label": "toxic", "language": lang} for t in _pick(tox, 120, lang)]
        rows += [{"text": t, "label": "clean", "language": lang}
                 for t in _pick((clean[0], clean[1], [":"], clean[2]), 120, lang)]
    for r in rows:  # "Thanks for the article : ..." -> "Thanks for the article: ..."
        r["text"] = r["text"].replace(" : ", ": ")
    return rows


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--shared", default=str(Path(__file__).resolve().parents[2] / ".." / "shared" / "data"))
    shared = Path(ap.parse_args().shared) / "web_text"
    write_gz(HERE / "positives" / "articles.jsonl.gz", positives(shared))
    path = HERE / "toxicity" / "comments.jsonl"
    path.parent.mkdir(parents=True, exist_ok=True)
    rows = toxicity()
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
    print(f"{path}: {len(rows)} rows")


if __name__ == "__main__":
    main()
