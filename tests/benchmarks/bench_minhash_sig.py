"""Signature phase per component on one 5,000-document shard of `scale_corpus` (warm word memo), against a
lower bound: the same word tokenisation and shingle hashes, then permutation minima with no Python per
shingle or per document (one numpy pass per permutation over the whole shard).

    nice -n 10 .venv/bin/python tests/benchmarks/bench_minhash_sig.py [--corpus DIR]
"""
import argparse
import gzip
import json
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import scale_corpus

from curation.steps.text.minhash import Shingler, band_keys, permutations, signature, signatures_batch

ap = argparse.ArgumentParser()
ap.add_argument("--corpus", default="/tmp/sig-work/corpus")
args = ap.parse_args()
corpus = Path(args.corpus)
if not (corpus / "part-00001.jsonl.gz").is_file():
    scale_corpus.build(corpus, 10000)
texts = [json.loads(line)["text"] for line in gzip.open(corpus / "part-00001.jsonl.gz", "rt")]
sh, (a, b) = Shingler(5, "eng"), permutations(112, 1)
for t in texts[:200]:
    sh.words(t)
clock = time.perf_counter
t0 = clock()
[sh.simplify(t) for t in texts]
t1 = clock()
[sh.words(t) for t in texts]
t2 = clock()
shingles = [sh(t) for t in texts]
t3 = clock()
old = [signature(s, a, b) for s in shingles]
t4 = clock()
new, empty = signatures_batch(shingles, a, b)
t5 = clock()
band_keys(new, 14, 8)
t6 = clock()
assert all(np.array_equal(o, new[d]) for d, o in enumerate(old) if o is not None)
print(f"docs {len(texts)}, shingles {sum(s.size for s in shingles):,}")
print(f"simplify {t1 - t0:.2f} s | words (incl. simplify) {t2 - t1:.2f} s | shingle hashes (incl. words) {t3 - t2:.2f} s")
print(f"permutations per document (before) {t4 - t3:.2f} s | batched (now) {t5 - t4:.2f} s | band keys {t6 - t5:.2f} s")
print(f"lower bound (words + one vectorised permutation pass, no shingle hashing in Python): {t2 - t1 + t5 - t4:.2f} s")
print(f"phase before {t3 - t2 + t4 - t3 + t6 - t5:.2f} s, now {t3 - t2 + t5 - t4 + t6 - t5:.2f} s")
