"""A corpus dense in exact copies, URL re-crawls and chains of both, with benchmark leaks, to prove that a
change to dedup or decontamination leaves every output as it was.

Three sources of two shards each (2,500 records a shard) from `scale_corpus`'s unique documents; each
record is, by a seeded draw: an exact copy of an earlier record's text (25%, at a new URL or none), a
re-crawl of an earlier record's URL with changed text (15%), a copy of an earlier re-crawl's text (5%: its
first copy may itself have been dropped as a re-crawl), a record without a URL (5%), or unique. Thirty
benchmark items quote 80-word spans of some documents (decontamination flags them). The recipe runs
exact + URL dedup, MinHash and decontamination.

    python tests/benchmarks/dup_corpus.py DIR        # writes DIR/corpus, DIR/bench.jsonl.gz, DIR/dups.yaml
    PYTHONPATH=<old tree> python -m curation.commands.cli run DIR/dups.yaml --out A --executor local
    PYTHONPATH=<new tree> python -m curation.commands.cli run DIR/dups.yaml --out B --executor local
    python tests/benchmarks/compare_outputs.py A B   # tokenized/, manifests/, ledger rows, drop lists, review
"""
from __future__ import annotations

import gzip
import json
import random
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import scale_corpus

VOCAB = scale_corpus.REPO / "tokenizers" / "curate-demo-v1.yaml"


def build(folder: Path, seed: int = 7) -> Path:
    rng = random.Random(seed)
    sents = scale_corpus.sentences()
    earlier, recrawls, n = [], [], 0
    for s in range(3):
        for shard in range(2):
            rows = []
            for _ in range(2500):
                text = scale_corpus.document(100_000 + n, sents, seed)["text"]
                url = f"https://site{rng.randrange(50)}.example/page/{n}"
                u = rng.random()
                if earlier and u < 0.25:
                    text, url = rng.choice(earlier)[0], (url if rng.random() < 0.7 else None)
                elif earlier and u < 0.40:
                    url = rng.choice([e for e in earlier if e[1]] or earlier)[1]
                    text = f"Updated edition {rng.randrange(10**6)}. {text}"
                    recrawls.append(text)
                elif recrawls and u < 0.45:
                    text = rng.choice(recrawls)
                elif u < 0.50:
                    url = None
                rows.append({"id": f"s{s}-{n}", "text": text, **({"url": url} if url else {})})
                earlier.append((text, url))
                n += 1
            path = folder / "corpus" / f"s{s}" / f"part-{shard}.jsonl.gz"
            path.parent.mkdir(parents=True, exist_ok=True)
            with gzip.open(path, "wt", encoding="utf-8") as f:
                f.writelines(json.dumps(r) + "\n" for r in rows)
    with gzip.open(folder / "bench.jsonl.gz", "wt", encoding="utf-8") as f:
        for i in range(30):
            words = rng.choice(earlier)[0].split()
            start = rng.randrange(max(1, len(words) - 80))
            f.write(json.dumps({"idx": i, "question": " ".join(words[start:start + 80])}) + "\n")
    sources = "".join(f"  - name: s{s}\n    license: MIT\n    input: {{paths: ['corpus/s{s}/*.jsonl.gz'], id_field: id, "
                      f"metadata_fields: [url]}}\n    normalize: {{nfc: false, ftfy: false}}\n" for s in range(3))
    recipe = folder / "dups.yaml"
    recipe.write_text(f"name: dups\nvocabulary: {VOCAB}\ndedup: {{exact: {{scope: global, url: url}}, minhash: {{}}}}\n"
                      "decontamination:\n  max_removal_rate: 1.0\n  benchmarks:\n"
                      "    - {name: leak, path: bench.jsonl.gz, fields: [question], id_field: idx}\n"
                      f"sources:\n{sources}")
    return recipe


if __name__ == "__main__":
    print(build(Path(sys.argv[1])))
