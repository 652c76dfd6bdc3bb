"""Side-by-side near-duplicate removal: curate vs datatrove's 4-stage MinHash vs datasketch MinHashLSH.

Corpus: real English documents from ../shared/data/web_text plus planted near-duplicates (word
edits and boilerplate changes of 20% of the documents), in 8 shards; the same parameters everywhere
(5-grams, 14 bands × 8 rows). Reported:
- docs/s end to end on 2 workers: `curate run` (read → MinHash phases → filter → tokenize → shards,
  embedded Ray) against datatrove's MinhashDedupSignature → Buckets → Cluster → Filter + JsonlWriter
  under LocalPipelineExecutor(workers=2); datasketch MinHashLSH single-process (its API is);
- agreement of the removed-document sets (Jaccard of the id sets) with curate's;
- peak RSS of curate's clustering step (connected components over the band edges) as the corpus grows
  1× → 10× by mutating the real documents, each in a fresh process.

Usage: .venv/bin/python tests/benchmarks/bench_dedup.py  → reports/benchmarks/dedup.md
Needs the bench extra: pip install -e '.[test,bench]'.
"""
from __future__ import annotations

import gzip
import json
import os
import platform
import random
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
SHARED = REPO.parent / "shared" / "data" / "web_text"
VOCAB = REPO / "tokenizers" / "curate-demo-v1.yaml"
CORPUS = ["news_articles_en.jsonl.gz", "cc_main_2019_30_extract.jsonl.gz", "c4_en_sample.jsonl.gz",
          "parlspeech_sample_en.jsonl.gz"]
SHARDS = 8


def real_docs() -> list[dict]:
    docs = []
    for name in CORPUS:
        for i, line in enumerate(gzip.open(SHARED / name, "rt", encoding="utf-8")):
            r = json.loads(line)
            if isinstance(r.get("text"), str) and len(r["text"].split()) >= 20:
                docs.append({"id": f"{name.split('.')[0]}-{i}", "text": r["text"]})
    return docs


def mutate(text: str, rng: random.Random, frac: float) -> str:
    return " ".join(w if rng.random() > frac else f"x{rng.randrange(10**6)}" for w in text.split())


def corpus(scale: int, seed: int = 0) -> list[dict]:
    """Real docs + planted near-dups; scale > 1 adds heavily mutated variants (not near-dups of each other)."""
    rng = random.Random(seed)
    base = real_docs()
    docs = list(base)
    for d in rng.sample(base, len(base) // 5):
        text = mutate(d["text"], rng, rng.choice([0.01, 0.02, 0.03]))
        if rng.random() < 0.5:
            text = "Home | News | Contact\n" + text + "\nAll rights reserved."
        docs.append({"id": d["id"] + "-near", "text": text})
    for k in range(1, scale):
        docs += [{"id": f"{d['id']}-v{k}", "text": mutate(d["text"], rng, 0.35)} for d in base]
    return docs


def write_shards(docs: list[dict], folder: Path) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    for s in range(SHARDS):
        with gzip.open(folder / f"part-{s:02d}.jsonl.gz", "wt", encoding="utf-8") as f:
            for d in docs[s::SHARDS]:
                f.write(json.dumps(d) + "\n")


def run_curate(folder: Path, out: Path, hashing: str = "curate") -> tuple[set[str], set[str]]:
    from curation.run import run
    recipe = out.parent / f"dedup-{hashing}.yaml"
    recipe.write_text(f"name: bench\nvocabulary: {VOCAB}\ndedup: {{exact: null, minhash: {{hashing: {hashing}}}}}\n"
                      f"tokenize_batch_size: 1000\nsources:\n  - name: en\n"
                      f"    input: {{paths: ['{folder}/*.jsonl.gz'], id_field: id}}\n"
                      f"    normalize: {{nfc: false, ftfy: false}}\n")
    run(recipe, out, workers=2, progress=False)
    import pyarrow.parquet as pq
    removed = set(pq.read_table(out / "work" / "minhash" / "duplicates.parquet").column("id").to_pylist())
    members = pq.read_table(out / "work" / "minhash" / "clusters.parquet").column("members").to_pylist()
    return removed, {m.split("/", 1)[1] for ms in members for m in ms}


def run_datatrove(folder: Path, work: Path, ids: set[str]) -> tuple[set[str], set[str]]:
    from datatrove.executor import LocalPipelineExecutor
    from datatrove.pipeline.dedup import (MinhashDedupBuckets, MinhashDedupCluster, MinhashDedupFilter,
                                          MinhashDedupSignature)
    from datatrove.pipeline.dedup.minhash import MinhashConfig
    from datatrove.pipeline.readers import JsonlReader
    from datatrove.pipeline.writers import JsonlWriter

    cfg = MinhashConfig()  # 5-grams, 14 buckets x 8 hashes
    reader = JsonlReader(str(folder), glob_pattern="*.jsonl.gz")
    logs = str(work / "logs")
    LocalPipelineExecutor([reader, MinhashDedupSignature(str(work / "sigs"), config=cfg)], tasks=SHARDS,
                          workers=2, logging_dir=f"{logs}/1").run()
    LocalPipelineExecutor([MinhashDedupBuckets(str(work / "sigs"), str(work / "buckets"), config=cfg)],
                          tasks=cfg.num_buckets, workers=2, logging_dir=f"{logs}/2").run()
    LocalPipelineExecutor([MinhashDedupCluster(str(work / "buckets"), str(work / "remove"), config=cfg,
                                               save_cluster_size=True)],
                          tasks=1, logging_dir=f"{logs}/3").run()
    LocalPipelineExecutor([JsonlReader(str(folder), glob_pattern="*.jsonl.gz"),
                           MinhashDedupFilter(str(work / "remove"), load_cluster_sizes=True),
                           JsonlWriter(str(work / "kept"), output_filename="${rank}.jsonl.gz")],
                          tasks=SHARDS, workers=2, logging_dir=f"{logs}/4").run()
    kept = [json.loads(line) for p in (work / "kept").glob("*.jsonl.gz")
            for line in gzip.open(p, "rt", encoding="utf-8")]
    removed = ids - {d["id"] for d in kept}
    clustered = removed | {d["id"] for d in kept if d.get("metadata", {}).get("minhash_cluster_size", 1) > 1}
    return removed, clustered


def run_datasketch(docs: list[dict]) -> tuple[set[str], set[str]]:
    from datasketch import MinHash, MinHashLSH

    from curation.runtime.minhash_tasks import components
    from curation.steps.minhash import simplify

    import numpy as np
    lsh = MinHashLSH(num_perm=112, params=(14, 8))
    edges = []
    for i, d in enumerate(docs):
        words = simplify(d["text"]).split(" ")
        m = MinHash(num_perm=112, seed=1)
        m.update_batch([" ".join(words[j:j + 5]).encode() for j in range(max(1, len(words) - 4))])
        edges += [(j, i) for j in lsh.query(m)]
        lsh.insert(i, m)
    labels = components(len(docs), np.asarray(edges, dtype=np.int64).reshape(-1, 2))
    roots = set(labels[labels != np.arange(len(docs))].tolist())
    removed = {d["id"] for i, d in enumerate(docs) if labels[i] != i}
    return removed, removed | {docs[r]["id"] for r in roots}


MEMORY_PROBE = r"""
import sys, time, tracemalloc, numpy as np
sys.path.insert(0, sys.argv[3])
from curation.runtime.minhash_tasks import components
n = int(sys.argv[2])
if sys.argv[1] == "synthetic":   # edges at the density of the real corpus: (ratio x n) random pairs
    rng = np.random.default_rng(0)
    m = int(float(sys.argv[4]) * n)
    edges = np.sort(rng.integers(0, n, (m, 2)), axis=1).astype(np.int64)
else:
    edges = np.load(sys.argv[1])
tracemalloc.start()
t = time.perf_counter(); components(n, edges); dt = time.perf_counter() - t
print(tracemalloc.get_traced_memory()[1], edges.shape[0], dt)
"""


def cluster_memory(n_docs: int, edges_file: str, density: float = 0.0) -> tuple[float, int, float]:
    """(peak MB allocated by the clustering step, edges, seconds), in a fresh process (numpy traced)."""
    res = subprocess.run([sys.executable, "-c", MEMORY_PROBE, edges_file, str(n_docs), str(REPO), str(density)],
                         capture_output=True, text=True, check=True)
    peak, edges, secs = res.stdout.split()
    return int(peak) / 2**20, int(edges), float(secs)


def all_edges(out: Path) -> str:
    import numpy as np
    edges = np.concatenate([np.load(p) for p in sorted((out / "work" / "minhash" / "edges").glob("*.npy"))])
    path = out / "all_edges.npy"
    np.save(path, edges)
    return str(path)


def main() -> None:
    if not SHARED.is_dir():
        print(f"skipped: {SHARED} is absent (the benchmark needs ../shared/data)")
        return
    os.environ.setdefault("RAY_TMPDIR", tempfile.mkdtemp(prefix="crb-", dir="/tmp"))
    work = Path(tempfile.mkdtemp(prefix="curate-dedup-"))
    lines = []
    try:
        docs = corpus(1)
        ids = {d["id"] for d in docs}
        folder = work / "corpus1"
        write_shards(docs, folder)
        t = time.perf_counter(); ours, ours_c = run_curate(folder, work / "curate1"); t_ours = time.perf_counter() - t
        t = time.perf_counter(); dt, dt_c = run_datatrove(folder, work / "dt", ids); t_dt = time.perf_counter() - t
        t = time.perf_counter()
        ourd, ourd_c = run_curate(folder, work / "curate-dt", "datatrove")
        t_ourd = time.perf_counter() - t
        t = time.perf_counter(); ds, ds_c = run_datasketch(docs); t_ds = time.perf_counter() - t
        planted = {i for i in ids if i.endswith("-near")}

        def agree(a, b):
            return len(a & b) / len(a | b) if a | b else 1.0

        mem = [("1×", len(docs), *cluster_memory(len(docs), all_edges(work / "curate1")), t_ours)]
        for scale in (3, 10):
            big = corpus(scale)
            write_shards(big, work / f"corpus{scale}")
            out = work / f"curate{scale}"
            t = time.perf_counter(); run_curate(work / f"corpus{scale}", out); secs = time.perf_counter() - t
            mem.append((f"{scale}×", len(big), *cluster_memory(len(big), all_edges(out)), secs))
        density = mem[-1][3] / mem[-1][1]
        for n in (1_000_000, 4_000_000):  # beyond what fits a real run here: edges at the measured density
            mem.append((f"synthetic {n // 10**6}M", n, *cluster_memory(n, "synthetic", density), float("nan")))
    finally:
        shutil.rmtree(work, ignore_errors=True)

    lines += [
        "# Near-duplicate removal: curate vs datatrove vs datasketch", "",
        f"Produced by `.venv/bin/python tests/benchmarks/bench_dedup.py` on {time.strftime('%Y-%m-%d')}, "
        f"{platform.machine()}, {os.cpu_count()} CPUs, Python {platform.python_version()}.", "",
        f"Corpus: {len(ids):,} documents in {SHARDS} shards: real English documents from `../shared/data/web_text/` "
        f"({', '.join(CORPUS)}) plus {len(planted):,} planted near-duplicates (1-3% of words edited, half "
        "with boilerplate added). Parameters everywhere: 5-grams, 14 bands × 8 rows.", "",
        "| pipeline | seconds | docs/s | removed | planted copies removed |", "|---|---|---|---|---|",
        f"| curate run, 2 workers (includes tokenizing the survivors into Megatron shards) | {t_ours:.1f} | "
        f"{len(ids) / t_ours:,.0f} | {len(ours):,} | {len(ours & planted):,} / {len(planted):,} |",
        f"| curate run, 2 workers, `hashing: datatrove` | {t_ourd:.1f} | {len(ids) / t_ourd:,.0f} | {len(ourd):,} | "
        f"{len(ourd & planted):,} / {len(planted):,} |",
        f"| datatrove 4-stage MinHash + JsonlWriter, 2 workers | {t_dt:.1f} | {len(ids) / t_dt:,.0f} | "
        f"{len(dt):,} | {len(dt & planted):,} / {len(planted):,} |",
        f"| datasketch MinHashLSH, 1 process | {t_ds:.1f} | {len(ids) / t_ds:,.0f} | {len(ds):,} | "
        f"{len(ds & planted):,} / {len(planted):,} |", "",
        "## Ratios and agreement", "",
        f"- curate / datatrove docs/s: **{t_dt / t_ours:.2f}×** with curate's hashing, "
        f"**{t_dt / t_ourd:.2f}×** with `hashing: datatrove` (goal ≥ 2×)",
        f"- curate / datasketch docs/s: **{t_ds / t_ours:.2f}×**",
        f"- agreement of detected near-duplicates (Jaccard of the sets of documents in clusters of 2 or more): "
        f"curate (`hashing: datatrove`) vs datatrove **{100 * agree(ourd_c, dt_c):.1f}%** (goal ≥ 99%); "
        f"curate's own hashing vs datatrove {100 * agree(ours_c, dt_c):.1f}%, vs datasketch "
        f"{100 * agree(ours_c, ds_c):.1f}% (independent hash functions disagree on borderline pairs near "
        "the S-curve's threshold, as two datatrove runs with different seeds would)",
        f"- agreement of removed ids: curate vs datatrove {100 * agree(ours, dt):.1f}%, vs datasketch "
        f"{100 * agree(ours, ds):.1f}%. Removed sets differ mainly by which member survives: curate keeps the "
        "earliest document in recipe order (documented rule), datatrove and datasketch keep another member.", "",
        "## Clustering step memory as the corpus grows", "",
        "Peak memory allocated by `components()` (min-label propagation over all band edges; numpy "
        "allocations traced with tracemalloc, in a fresh process, the edge array itself not counted). "
        "Synthetic rows use random edges at the density of the 10× run.", "",
        "| corpus | documents | edges | clustering peak MB | MB per million documents | clustering s | curate run s |",
        "|---|---|---|---|---|---|---|",
        *[f"| {s} | {n:,} | {e:,} | {p:.1f} | {p / n * 1e6:.0f} | {c:.2f} | {'—' if r != r else f'{r:.1f}'} |"
          for s, n, p, e, c, r in mem], "",
        "The clustering step needs O(documents + edges) memory: labels (8 bytes per document) plus temporaries "
        "of the edge count; the table gives the measured bound per million documents. Signatures and band "
        "tasks hold one shard or one band column at a time.", "",
    ]
    report = REPO / "reports" / "benchmarks" / "dedup.md"
    report.write_text("\n".join(lines))
    print("\n".join(lines))


if __name__ == "__main__":
    sys.exit(main())
