"""A signature or decontamination task holds one batch of its shard's text, not the shard: its peak RSS
for a shard of 20,000 documents (about 47 MB of text) stays within a bound that does not depend on the
shard's size. Each measurement runs in a fresh process (the high-water mark of RSS, after a warm-up
that loads spaCy and the caches on a small shard)."""
from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tests.conftest import REPO

PROBE = r"""
import json, random, resource, sys
from pathlib import Path
import pyarrow as pa, pyarrow.parquet as pq
from curation.core.layout import decont_dir, processed_path
from curation.core.node import Node
from curation.corpus.decont.benchmarks import Item
from curation.corpus.decont.index import build_index
from curation.corpus.decont.match import run_decont
from curation.corpus.minhash import run_signatures

task, n, out = sys.argv[1], int(sys.argv[2]), Path(sys.argv[3])
letters = "abcdefghijklmnopqrstuvwxyz"   # no digits: the shingler folds every number to 0
words = [a + b + c for a in letters for b in letters for c in letters[:5]]

def shard(name, count):
    rng = random.Random(count)
    path = processed_path(out, "src", name)
    path.parent.mkdir(parents=True, exist_ok=True)
    w = pq.ParquetWriter(path, pa.schema([("id", pa.string()), ("text", pa.string())]))
    for start in range(0, count, 1000):
        texts = [" ".join(rng.choices(words, k=600)) for _ in range(min(1000, count - start))]
        w.write_table(pa.table({"id": [f"d{start + i}" for i in range(len(texts))], "text": texts}))
    w.close()

items = [Item("bench", str(i), " ".join(random.Random(i).choices(words, k=60))) for i in range(50)]
table = build_index(items, 13, 4, decont_dir(out) / "index")
pq.write_table(table, decont_dir(out) / "items.parquet")
spec = {"cfg": {"ngram": 5, "language": "eng", "seed": 1}, "bands": 14, "rows": 8, "partitions": 8,
        "keys": "0" * 16} if task == "signatures" else \
    {"ngram": 13, "shards": 4, "threshold": 0.5}
run = run_signatures if task == "signatures" else run_decont
shard("warm", 2000)   # two full batches: what one batch allocates is in the baseline
shard("big", n)
run(out, Node(task, "src", "warm", "fp", spec=spec))
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
result = run(out, Node(task, "src", "big", "fp", spec=spec))
after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
import pyarrow.compute as pc
text = pq.read_table(processed_path(out, "src", "big"), columns=["text"]).column("text")
print(json.dumps({"flagged": result.get("flagged", 0), "growth_mb": (after - before) / 1024,
                  "text_mb": pc.sum(pc.binary_length(text)).as_py() / 2**20}))
"""


def _growth(task: str, n: int, tmp_path) -> dict:
    folder = tmp_path / f"{task}-{n}"
    p = subprocess.run([sys.executable, "-c", PROBE, task, str(n), str(folder)], cwd=REPO, capture_output=True,
                       text=True, timeout=900)
    assert p.returncode == 0, p.stderr[-3000:]
    return json.loads(p.stdout.strip().splitlines()[-1])


@pytest.mark.slow
@pytest.mark.parametrize("task", ["signatures", "decont"])
def test_a_shards_text_is_never_held_whole(task, tmp_path):
    small, big = _growth(task, 4000, tmp_path), _growth(task, 20000, tmp_path)
    assert big["text_mb"] > 40 and big["flagged"] == 0
    # what the task keeps per document (8 bytes per band of a signature, a flag) is all that may grow:
    # 20,000 × 14 × 8 bytes = 2.2 MB, twice while concatenated; the text column alone is > 40 MB
    assert big["growth_mb"] < 16, (small, big)
    assert big["growth_mb"] - small["growth_mb"] < 8, (small, big)
