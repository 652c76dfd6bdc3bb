"""The scale benchmark's corpus: N unique documents recombined from real sentences, with planted copies.

Sentences come from the English (and the multilingual Common Crawl) documents of
`../shared/data/web_text/`, split at sentence ends and de-duplicated (about 66k). Document i is a
function of (seed, i) alone: 8 to 24 sentences drawn with a generator seeded by its index, and a URL of
its own. So the corpus of N documents is the first N/`PER_SHARD` shards of any larger one, and one
generated folder serves every size (`link_prefix`). A share of the documents are planted copies of an
earlier one (drawn from its index):

    near     the earlier text with 1-3% of its words replaced (5-gram Jaccard ~0.75-0.9: MinHash)
    exact    the earlier text, byte for byte, at another URL (a syndicated copy: exact dedup)
    recrawl  the earlier URL with a changed first line (the same page fetched again: URL dedup)

Two random documents share a sentence with probability about 0.4%, far below any near-duplicate
threshold, so the unique documents are unique for MinHash too.
"""
from __future__ import annotations

import gzip
import json
import random
import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
SHARED = REPO.parent / "shared" / "data" / "web_text"
FILES = ["news_articles_en.jsonl.gz", "cc_main_2019_30_extract.jsonl.gz", "c4_en_sample.jsonl.gz",
         "parlspeech_sample_en.jsonl.gz", "c4_100_domains_theguardian_sample.jsonl.gz"]
PER_SHARD = 5000
PLANTS = {"near": 0.08, "exact": 0.01, "recrawl": 0.01}   # 10% of the documents are planted copies
UNPLANTED = 1000                                          # the first documents are all unique


def sentences() -> list[str]:
    found: dict[str, None] = {}
    for name in FILES:
        for line in gzip.open(SHARED / name, "rt", encoding="utf-8"):
            text = json.loads(line).get("text")
            if isinstance(text, str):
                for s in re.split(r"(?<=[.!?])\s+", text):
                    s = " ".join(s.split())
                    if 5 <= len(s.split()) <= 60:
                        found[s] = None
    return list(found)


def _base(i: int, sents: list[str], seed: int) -> str:
    rng = random.Random(f"{seed}:doc:{i}")
    return " ".join(rng.choice(sents) for _ in range(rng.randint(8, 24)))


def _url(i: int) -> str:
    return f"https://www.site{i % 4999}.example/articles/{i:08d}.html"


def _mutate(text: str, rng: random.Random, rate: float) -> str:
    return " ".join(w if rng.random() > rate else f"x{rng.randrange(10**6)}" for w in text.split())


def document(i: int, sents: list[str], seed: int = 0) -> dict:
    """Document i of the corpus: {"id", "text", "url", "plant"} ("plant": None or kind:original index)."""
    rng = random.Random(f"{seed}:plant:{i}")
    u, kind, acc = rng.random(), None, 0.0
    for name, share in PLANTS.items():
        acc += share
        if kind is None and u < acc and i >= UNPLANTED:
            kind = name
    if kind is None:
        return {"id": f"d{i:08d}", "text": _base(i, sents, seed), "url": _url(i), "plant": None}
    j = rng.randrange(i)
    text = _base(j, sents, seed)
    if kind == "near":
        text, url = _mutate(text, rng, rng.choice((0.01, 0.02, 0.03))), _url(i)
    elif kind == "exact":
        url = _url(i)
    else:
        text, url = f"Updated {rng.randrange(1, 29)} November: " + text, _url(j)
    return {"id": f"d{i:08d}", "text": text, "url": url, "plant": f"{kind}:{j}"}


def build(folder: Path, n: int, seed: int = 0, per_shard: int = PER_SHARD) -> dict:
    """Write documents 0..n-1 as `part-NNNNN.jsonl.gz` files of `per_shard` each (complete shards written
    earlier are kept: each has a `.done` file with its counts); returns counts: documents, bytes of text,
    planted copies by kind."""
    folder.mkdir(parents=True, exist_ok=True)
    sents = None
    total = {"documents": 0, "text_bytes": 0, **{k: 0 for k in PLANTS}}
    for k in range(0, (n + per_shard - 1) // per_shard):
        path = folder / f"part-{k:05d}.jsonl.gz"
        done = path.with_name(path.name + ".done")
        want = min(n, (k + 1) * per_shard) - k * per_shard
        counts = json.loads(done.read_text()) if done.is_file() and path.is_file() else None
        if counts is None or counts["documents"] != want:
            sents = sents or sentences()
            docs = [document(i, sents, seed) for i in range(k * per_shard, k * per_shard + want)]
            counts = {"documents": want, "text_bytes": sum(len(d["text"].encode()) for d in docs),
                      **{kind: sum(1 for d in docs if (d["plant"] or "").startswith(kind + ":")) for kind in PLANTS}}
            tmp = path.with_name(path.name + ".tmp")
            with gzip.open(tmp, "wt", encoding="utf-8", compresslevel=1) as f:
                for d in docs:
                    f.write(json.dumps({"id": d["id"], "text": d["text"], "url": d["url"]}) + "\n")
            tmp.replace(path)
            done.write_text(json.dumps(counts))
        for key, v in counts.items():
            total[key] += v
    return total


def link_prefix(source: Path, folder: Path, n: int, per_shard: int = PER_SHARD) -> Path:
    """A folder holding links to the first n/per_shard shards of `source`: the corpus of n documents."""
    folder.mkdir(parents=True, exist_ok=True)
    for k in range((n + per_shard - 1) // per_shard):
        link = folder / f"part-{k:05d}.jsonl.gz"
        if not link.exists():
            link.symlink_to(source / link.name)
    return folder
