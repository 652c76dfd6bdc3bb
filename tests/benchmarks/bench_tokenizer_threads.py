"""HF `tokenizers` threads in a Ray worker: the pool over every core against one thread, two workers at once.

    .venv/bin/python tests/benchmarks/bench_tokenizer_threads.py [--docs 5000] [--rounds 3]

Why: a Ray task asks for one CPU, and `curate run --workers N` runs N of them on N cores, yet `tokenizers`
spreads each `encode_batch_fast` over a thread pool of every core (rayon) in every worker. This runs what two
tokenize tasks do side by side (two processes, each encoding its own shard of `scale_corpus` documents in
batches of 1,000, as `TextTokenizer` does) with the default pool and with `RAYON_NUM_THREADS=1`, alternating
the two settings round by round, and reports wall seconds of the pair and CPU seconds summed over both
processes. The token counts must agree (ids do not depend on threads). Writes
reports/benchmarks/tokenizer_threads.md.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))
TOKENIZER = REPO / "tokenizers" / "curate-demo-bpe.json"
REPORT = REPO / "reports" / "benchmarks" / "tokenizer_threads.md"

ONE = """
import json, sys, time
from tokenizers import Tokenizer
tok = Tokenizer.from_file(sys.argv[1])
docs = [json.loads(line)["text"] for line in open(sys.argv[2], encoding="utf-8")]
cpu = time.process_time()
n = sum(len(e.ids) for i in range(0, len(docs), 1000)
        for e in tok.encode_batch_fast(docs[i:i + 1000], add_special_tokens=False))
print(json.dumps({"cpu": time.process_time() - cpu, "tokens": n}))
"""


def pair(shards: list[Path], threads: str | None) -> dict:
    env = {k: v for k, v in os.environ.items() if k not in ("RAYON_NUM_THREADS", "TOKENIZERS_PARALLELISM")}
    if threads:
        env["RAYON_NUM_THREADS"] = threads
    start = time.perf_counter()
    procs = [subprocess.Popen([sys.executable, "-c", ONE, str(TOKENIZER), str(s)], env=env, stdout=subprocess.PIPE,
                              text=True) for s in shards]
    outs = [json.loads(p.communicate()[0]) for p in procs]
    return {"wall": time.perf_counter() - start, "cpu": sum(o["cpu"] for o in outs),
            "tokens": [o["tokens"] for o in outs]}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--docs", type=int, default=5000, help="documents per process")
    ap.add_argument("--rounds", type=int, default=3)
    a = ap.parse_args()
    from tests.benchmarks.scale_corpus import document, sentences
    sents = sentences()
    with tempfile.TemporaryDirectory() as tmp:
        shards = []
        for s in range(2):
            path = Path(tmp) / f"shard-{s}.jsonl"
            path.write_text("".join(json.dumps({"text": document(s * a.docs + i, sents)["text"]}) + "\n"
                                    for i in range(a.docs)), encoding="utf-8")
            shards.append(path)
        rows = []
        for r in range(a.rounds):
            for threads in ((None, "1") if r % 2 == 0 else ("1", None)):
                res = pair(shards, threads)
                rows.append({"round": r + 1, "threads": threads or "default", **res})
                print(rows[-1], flush=True)
    assert len({tuple(r["tokens"]) for r in rows}) == 1, "token counts differ between the settings"
    mean = {t: {k: sum(r[k] for r in rows if r["threads"] == t) / a.rounds for k in ("wall", "cpu")}
            for t in ("default", "1")}
    load = os.getloadavg()
    lines = ["# HF tokenizers' threads in two Ray workers on two cores", "",
             f"Produced by `.venv/bin/python tests/benchmarks/bench_tokenizer_threads.py --docs {a.docs} --rounds "
             f"{a.rounds}` on {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, {os.cpu_count()} CPUs, load "
             f"{load[0]:.1f} / {load[1]:.1f} / {load[2]:.1f} at the end (a shared machine). Two processes at once, "
             f"each encoding {a.docs:,} `scale_corpus` documents with `encode_batch_fast` in batches of 1,000 "
             f"(`tokenizers/curate-demo-bpe.json`), as two tokenize tasks on two workers do; the settings alternate "
             f"round by round. Token counts equal in every run ({sum(rows[0]['tokens']):,} tokens per run).", "",
             "| round | RAYON_NUM_THREADS | wall s (the pair) | CPU s (both processes) |", "|---|---|---|---|"]
    lines += [f"| {r['round']} | {r['threads']} | {r['wall']:.2f} | {r['cpu']:.2f} |" for r in rows]
    lines += ["", f"Mean: default pool {mean['default']['wall']:.2f} s wall, {mean['default']['cpu']:.2f} CPU s; one "
              f"thread {mean['1']['wall']:.2f} s wall, {mean['1']['cpu']:.2f} CPU s: one thread per worker takes "
              f"**{mean['1']['wall'] / mean['default']['wall']:.2f}×** the wall time and "
              f"**{mean['1']['cpu'] / mean['default']['cpu']:.2f}×** the CPU time of the default.", "",
              "What curate does with it: a Ray task sets `RAYON_NUM_THREADS=1` before its worker's first batch unless "
              "the cluster's environment sets it (`curation/runtime/ray_executor.py`, `_on_node`), as Ray sets "
              "OMP_NUM_THREADS=1 for torch; the local executor, which runs one task at a time, keeps the pool over "
              "every core.", ""]
    REPORT.write_text("\n".join(lines))
    print("\n".join(lines))


if __name__ == "__main__":
    main()
