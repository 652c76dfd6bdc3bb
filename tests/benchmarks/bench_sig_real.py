"""The MinHash signature phase on unseen real text: curate's signatures task against datatrove's
`MinhashDedupSignature` and against a lower bound, over the real English documents of ../shared/data/web_text
(no recombination, so no memo pays off beyond what one corpus repeats of itself), each side in a fresh process.

    nice -n 10 .venv/bin/python tests/benchmarks/bench_sig_real.py [--rounds 3]

Sides (5-grams, 14 bands × 8 rows, datatrove's defaults; CPU seconds of the process, the documents read first):
- `datatrove`: `MinhashDedupSignature.get_shingles` + `get_signature` per document, as its pipeline step does.
- `curate`: `Shingler.hashes` (fresh word memo) + `signatures_batch` over batches of 1,024 + `band_keys`, as
  `curation.corpus.minhash.run_signatures` does.
- `bound`: the same words as integer ids (computed before the clock starts), then per document the n-gram
  keys in numpy (a multiplicative hash of the 5 ids instead of xxh64 of the joined string), their unique set,
  and the same permutation minima and band keys: hashing the same shingles with no Python per shingle
  (nor per word), the cost the signature phase cannot go below without another tokenizer.
datatrove's and curate's signatures are compared (sha256 over all band keys): they must be identical
(the bound's differ: another hash).
"""
from __future__ import annotations

import argparse
import gzip
import hashlib
import json
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
WEB = REPO.parent / "shared" / "data" / "web_text"
FILES = ["news_articles_en.jsonl.gz", "cc_main_2019_30_extract.jsonl.gz", "c4_en_sample.jsonl.gz",
         "parlspeech_sample_en.jsonl.gz"]
BATCH = 1024


def texts() -> list[str]:
    out = []
    for name in FILES:
        with gzip.open(WEB / name, "rt", encoding="utf-8") as f:
            out += [t for t in (json.loads(line).get("text") or "" for line in f) if t.strip()]
    return out


def run_side(side: str) -> dict:
    import numpy as np

    from curation.steps.text.minhash import NO_SHINGLES, Shingler, band_keys, permutations, signatures_batch
    docs = texts()
    a, b = permutations(112, 1)
    clock = time.process_time
    keys = []
    if side == "datatrove":
        from datatrove.pipeline.dedup import MinhashDedupSignature
        from datatrove.pipeline.dedup.minhash import MinhashConfig
        theirs = MinhashDedupSignature("/tmp", config=MinhashConfig())
        theirs.word_tokenizer.word_tokenize("warm up")   # loads spaCy outside the clock, as curate's side does
        t0 = clock()
        for text in docs:
            sh = theirs.get_shingles(text)
            sig = np.asarray(theirs.get_signature(sh), dtype=np.uint64).reshape(1, -1) if sh.size else None
            keys.append(band_keys(sig, 14, 8)[0] if sig is not None else np.full(14, NO_SHINGLES))
        seconds = clock() - t0
    else:
        shingler = Shingler(5, "eng")
        shingler.words("warm up")
        if side == "bound":   # word ids outside the clock; per document, n-gram keys in numpy (another hash)
            vocab: dict[str, int] = {}
            ids = [np.fromiter((vocab.setdefault(w, len(vocab) + 1) for w in shingler.words(t)), np.uint64)
                   for t in docs]
            mult = np.uint64(0x9E3779B97F4A7C15)
            t0 = clock()
            shingles = []
            for w in ids:
                count = w.size - 4
                if count <= 0:
                    shingles.append(np.zeros(0, np.uint64))
                    continue
                key = w[:count].copy()
                for k in range(1, 5):
                    key = key * mult + w[k:k + count]
                shingles.append(np.unique(key))
        else:
            t0 = clock()
            shingles = [shingler.hashes(t) for t in docs]
        for at in range(0, len(shingles), BATCH):
            full, empty = signatures_batch(shingles[at:at + BATCH], a, b)
            batch = band_keys(full, 14, 8)
            batch[empty] = NO_SHINGLES
            keys += list(batch)
        seconds = clock() - t0
    digest = hashlib.sha256(b"".join(np.asarray(k, dtype=np.uint64).tobytes() for k in keys)).hexdigest()
    return {"side": side, "documents": len(docs), "cpu_seconds": round(seconds, 2), "sha256": digest}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--side", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.side:
        print(json.dumps(run_side(args.side)))
        return
    if not WEB.is_dir():
        print(f"skipped: {WEB} is absent (the benchmark needs ../shared/data)")
        return
    best: dict[str, dict] = {}
    for r in range(args.rounds):   # interleaved, so the sides share the machine's load; the best round counts
        for side in ("datatrove", "curate", "bound"):
            res = json.loads(subprocess.run([sys.executable, __file__, "--side", side], capture_output=True,
                                            text=True, check=True).stdout)
            print(f"round {r}: {side} {res['cpu_seconds']} s", flush=True)
            if side not in best or res["cpu_seconds"] < best[side]["cpu_seconds"]:
                best[side] = res
    same = best["datatrove"]["sha256"] == best["curate"]["sha256"]
    dt, cu, lb = (best[s]["cpu_seconds"] for s in ("datatrove", "curate", "bound"))
    print(json.dumps({"best": best, "identical": same, "curate_vs_datatrove": round(dt / cu, 2),
                      "curate_vs_bound": round(cu / lb, 2)}, indent=1))


if __name__ == "__main__":
    main()
