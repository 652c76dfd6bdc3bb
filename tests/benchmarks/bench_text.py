"""Side-by-side: curate's text path vs the equivalent datatrove pipeline vs bare `tokenizers`.

Three measurements, one run (`nice` it: the machine is shared):

1. the quality-filter stage alone (GopherRepetition → GopherQuality → C4Quality → FineWebQuality,
   defaults) on the real English documents of ../shared/data/web_text, each variant in a fresh
   process (tests/benchmarks/filter_stage.py): datatrove's filters, curate's old step (datatrove's
   `filter()` sharing one spaCy pass per document) and curate's fast filters; the digests of every
   document's verdicts, reasons and final text must agree;
2. the whole text path, end to end with 2 workers each, on a corpus of `--docs` documents (the real
   ones, new documents recombining their lines, 10% planted near-duplicates and 3% exact copies):
   `curate run` (read → normalize → language ID → the four filters → exact + MinHash dedup →
   tokenize → Megatron shards; embedded Ray, start-up included) against datatrove's pipeline of the
   same steps under LocalPipelineExecutor(workers=2): JsonlReader → fastText LID (the same lid.176.ftz
   and decision rule as curate's language filter; datatrove's LanguageFilter downloads its model) →
   the four filters → JsonlWriter; ExactDedupSignature → ExactFindDedups → ExactDedupFilter; the
   4-stage MinHash (5-grams, 14×8), each cluster keeping its earliest member as curate does (from the
   cluster step's own .clusters files, `earliest_survivors`); MegatronDocumentTokenizer. Kept ids and
   every kept document's token sequence must be identical (asserted after the report is written), and
   the clusters are compared with curate's ledger clusters, with datatrove's native survivors too;
3. the tokenize stage (curate's TextTokenizer + shard writer) against bare `Tokenizer.encode_batch`
   on the same documents, interleaved batch by batch so that load from other processes hits both.

Usage: nice .venv/bin/python tests/benchmarks/bench_text.py [--docs 32000] → reports/benchmarks/text.md
Needs the bench extra: pip install -e '.[test,bench]'.
"""
from __future__ import annotations

import argparse
import gzip
import hashlib
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))
SHARED = REPO.parent / "shared" / "data" / "web_text"
VOCAB = REPO / "tokenizers" / "curate-demo-v1.yaml"
TOKENIZER = REPO / "tokenizers" / "curate-demo-bpe.json"
CORPUS = ["news_articles_en.jsonl.gz", "cc_main_2019_30_extract.jsonl.gz", "c4_en_sample.jsonl.gz",
          "parlspeech_sample_en.jsonl.gz"]
SHARDS = 8
FILTERS = ["gopher_repetition", "gopher_quality", "c4_quality", "fineweb_quality"]
STAGE_SECONDS: dict[str, float] = {}  # datatrove's stages, wall seconds


def real_docs() -> list[dict]:
    docs = []
    for name in CORPUS:
        for i, line in enumerate(gzip.open(SHARED / name, "rt", encoding="utf-8")):
            r = json.loads(line)
            if isinstance(r.get("text"), str) and r["text"].strip():
                docs.append({"id": f"{name.split('.')[0]}-{i}", "text": r["text"]})
    return docs


def _edit(text: str, rng: random.Random, rate: float) -> str:
    return "\n".join(" ".join(w if rng.random() > rate else f"x{rng.randrange(10**6)}" for w in line.split(" "))
                     for line in text.split("\n"))


def _english(docs: list[dict]) -> list[dict]:
    """The documents curate's language filter (lid.176.ftz, score >= 0.65) takes for English."""
    from curation.steps.text.filters.document import _load_fasttext, bundled_lid_model
    model = _load_fasttext(str(bundled_lid_model()))
    predict = getattr(model, "f", model).predict
    out = []
    for d in docs:
        pred = predict(" ".join(d["text"].split()), 1, 0.0, "strict")
        if pred and pred[0][1] == "__label__en" and pred[0][0] >= 0.65:
            out.append(d)
    return out


def scaled_corpus(n_docs: int, seed: int = 0) -> list[list[dict]]:
    """Shards of: the real documents; new ones, each with the line count of a random real English
    document filled with random lines of real English documents; 10% near-duplicates (2% of words
    replaced) and 3% exact copies of earlier documents. Every document with the text of an earlier
    one goes to that one's shard, after it, and each row carries its shard number (datatrove's exact
    dedup is told to keep the earliest shard's copy, as curate does)."""
    rng = random.Random(seed)
    base = real_docs()
    english = _english(base)
    lines = [line for d in english for line in d["text"].split("\n") if line.strip()]
    docs = list(base)
    n_new = max(0, int(n_docs / 1.13) - len(base))
    for k in range(n_new):
        shape = rng.choice(english)["text"].count("\n") + 1
        docs.append({"id": f"mix-{k}", "text": "\n".join(rng.choice(lines) for _ in range(min(shape, 40)))})
    for kind, share in (("near", 0.10), ("copy", 0.03)):
        for k, i in enumerate(sorted(rng.sample(range(len(docs)), int(len(docs) * share)))):
            original = docs[i]
            text = _edit(original["text"], rng, 0.02) if kind == "near" else original["text"]
            docs.append({"id": f"{original['id']}-{kind}{k}", "text": text})
    shards: list[list[dict]] = [[] for _ in range(SHARDS)]
    home: dict[str, int] = {}
    for i, d in enumerate(docs):
        s = home.setdefault(d["text"], i % SHARDS)
        shards[s].append({**d, "shard": s})
    return shards


def write_shards(shards: list[list[dict]], folder: Path) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    for s, docs in enumerate(shards):
        with gzip.open(folder / f"part-{s:02d}.jsonl.gz", "wt", encoding="utf-8") as f:
            for d in docs:
                f.write(json.dumps(d) + "\n")


# -- 1. the filter stage ------------------------------------------------------------------------
def filter_stage(texts: list[str], work: Path) -> dict:
    path = work / "filter-texts.jsonl"
    path.write_text("".join(json.dumps({"text": t}) + "\n" for t in texts), encoding="utf-8")
    results = {}
    for mode in ("datatrove", "old", "new"):
        out = work / f"filter-{mode}.json"
        subprocess.run([sys.executable, str(REPO / "tests" / "benchmarks" / "filter_stage.py"), mode, str(path),
                        str(out)], check=True, cwd=REPO, env={**os.environ, "PYTHONPATH": str(REPO)})
        results[mode] = json.loads(out.read_text())
    digests = {r["first"]["digest"] for r in results.values()} | {results["new"]["second"]["digest"]}
    results["identical"] = len(digests) == 1
    return results


# -- 2. the whole text path -----------------------------------------------------------------------
def curate_recipe(folder: Path, corpus: Path) -> Path:
    flist = ", ".join(["{type: language, languages: [en]}"] + [f"{{type: {t}}}" for t in FILTERS])
    p = folder / "bench.yaml"
    p.write_text(f"name: bench\nvocabulary: {VOCAB}\ndedup: {{exact: {{}}, minhash: {{}}}}\n"
                 f"tokenize_batch_size: 1000\n"
                 f"sources:\n  - name: en\n    license: MIT\n    input: {{paths: ['{corpus}/*.jsonl.gz'], id_field: id}}\n"
                 f"    normalize: {{nfc: false, ftfy: false}}\n    filters: [{flist}]\n")
    return p


def curate_e2e(corpus: Path, out: Path, work: Path) -> dict:
    """kept: the kept ids in token-shard order; tokens: id -> digest of its token sequence; clusters:
    the MinHash clusters (frozensets of ids, each with its survivor); exact: the ids exact dedup removed."""
    import pyarrow.parquet as pq

    from curation.commands.run import run
    from curation.steps.droplist import read_drops
    # Ray: `auto` picks the local executor without an address, which runs one task at a time
    run(curate_recipe(work, corpus), out, workers=2, progress=False, executor="ray")
    ids = [i for p in sorted((out / "processed" / "en").glob("*.parquet")) for i in pq.read_table(p).column("id").to_pylist()]
    # what the corpus-wide phases (exact, minhash) remove, shard by shard (`curation.core.layout.drops_path`)
    gone = {i for p in (out / "work").glob("*/drops/en/*.parquet") for i in read_drops(p)}
    exact = {i for p in (out / "work").glob("exact/drops/en/*.parquet") for i in read_drops(p)}
    kept = [i for i in ids if i not in gone]
    # the ledger's `clusters` rows (work/minhash/clusters.parquet): members "en/<id>", kept_id the survivor
    rows = pq.read_table(out / "work" / "minhash" / "clusters.parquet").to_pylist()
    clusters = {frozenset(m.split("/", 1)[1] for m in r["members"]): r["kept_id"] for r in rows}
    return {"kept": kept, "tokens": per_document(kept, [out / "tokenized" / "en" / "en"]), "clusters": clusters,
            "exact": exact}


def curate_step_seconds(out: Path) -> dict[str, float]:
    """Seconds each step spent, summed over its tasks (from the run's task markers)."""
    seconds: Counter = Counter()
    for p in (out / "work" / "markers").rglob("*.json"):
        for s in json.loads(p.read_text()).get("stats") or []:
            if isinstance(s, dict) and "step" in s:
                seconds[s["step"]] += s.get("seconds", 0.0)
    return dict(seconds)


def text_of(doc) -> str:  # datatrove's exact dedup takes the hash function's type from the annotation
    return doc.text


def earliest_shard_first(doc) -> int:
    """Exact-dedup priority: the copy in the earliest shard survives (then the earliest row), which
    is curate's rule; datatrove's default keeps the lowest row number of any shard."""
    return 65535 - int(doc.metadata["shard"])


def earliest_survivors(clusters: Path, out: Path) -> dict[int, list[tuple[int, int]]]:
    """Survivor alignment: datatrove's MinhashDedupCluster keeps the union-find root of each cluster
    (union by size), curate keeps the earliest member (`dedup.minhash.keep: earliest`: source, shard,
    row). From the cluster step's own `.clusters` files ((doc, cluster id) per input file), write
    `.remove` files to `out` that keep each cluster's smallest (file, doc): file = rank = the corpus
    shard, doc = row within it, i.e. curate's rule. Clusters and buckets stay datatrove's. Returns
    cluster id -> members (file, doc), ascending."""
    members: dict[int, list[tuple[int, int]]] = {}
    for f in sorted(clusters.glob("*.clusters")):
        pairs = np.fromfile(f, dtype="<u4").reshape(-1, 2)
        for doc, cid in pairs.tolist():
            members.setdefault(cid, []).append((int(f.stem), doc))
    remove: dict[int, list[int]] = {}
    for m in members.values():
        m.sort()
        for file, doc in m[1:]:
            remove.setdefault(file, []).append(doc)
    out.mkdir(parents=True, exist_ok=True)
    for file, docs in remove.items():  # MinhashDedupFilter reads each file's removals ascending
        np.array(sorted(docs), dtype="<u4").tofile(out / f"{file:06d}.remove")
    return members


def datatrove_e2e(corpus: Path, work: Path) -> dict:
    from datatrove.executor import LocalPipelineExecutor
    from datatrove.pipeline.dedup import (
        MinhashDedupBuckets,
        MinhashDedupCluster,
        MinhashDedupFilter,
        MinhashDedupSignature,
    )
    from datatrove.pipeline.dedup.exact_dedup import (
        ExactDedupConfig,
        ExactDedupFilter,
        ExactDedupSignature,
        ExactFindDedups,
    )
    from datatrove.pipeline.dedup.minhash import MinhashConfig
    from datatrove.pipeline.filters import (
        C4QualityFilter,
        FineWebQualityFilter,
        GopherQualityFilter,
        GopherRepetitionFilter,
    )
    from datatrove.pipeline.readers import JsonlReader
    from datatrove.pipeline.tokens import MegatronDocumentTokenizer
    from datatrove.pipeline.writers import JsonlWriter

    from curation.steps.text.filters.document import bundled_lid_model
    from tests.benchmarks.datatrove_lid import FastTextLID

    logs, w = str(work / "logs"), 2

    def stage(name, steps, tasks=SHARDS):
        start = time.perf_counter()
        LocalPipelineExecutor(steps, tasks=tasks, workers=w, logging_dir=f"{logs}/{name}", skip_completed=False).run()
        STAGE_SECONDS[name] = time.perf_counter() - start

    def writer(folder):
        return JsonlWriter(str(work / folder), output_filename="${rank}.jsonl.gz")

    def reader(folder):
        return JsonlReader(str(work / folder) if folder != corpus else str(corpus), glob_pattern="*.jsonl.gz")

    stage("1-filter", [reader(corpus), FastTextLID(str(bundled_lid_model()), ["en"]), GopherRepetitionFilter(),
                       GopherQualityFilter(), C4QualityFilter(), FineWebQualityFilter(), writer("filtered")])
    exact = ExactDedupConfig(content_getter=text_of, document_priority=earliest_shard_first)
    stage("2-exact-sig", [reader("filtered"), ExactDedupSignature(str(work / "esig"), config=exact)])
    stage("3-exact-find", [ExactFindDedups(str(work / "esig"), str(work / "edups"), config=exact)], tasks=1)
    stage("4-exact-filter", [reader("filtered"), ExactDedupFilter(str(work / "edups"), config=exact), writer("exact")])
    cfg = MinhashConfig()  # 5-grams, 14 buckets x 8 hashes, as curate's defaults
    stage("5-mh-sig", [reader("exact"), MinhashDedupSignature(str(work / "msig"), config=cfg)])
    stage("6-mh-buckets", [MinhashDedupBuckets(str(work / "msig"), str(work / "mbuckets"), config=cfg)],
          tasks=cfg.num_buckets)
    stage("7-mh-cluster", [MinhashDedupCluster(str(work / "mbuckets"), str(work / "mremove"), config=cfg,
                                               save_cluster_id=True)], tasks=1)
    start = time.perf_counter()
    members = earliest_survivors(work / "mremove", work / "mremove-earliest")
    STAGE_SECONDS["7-mh-cluster"] += time.perf_counter() - start
    stage("8-mh-filter-tokenize", [reader("exact"), MinhashDedupFilter(str(work / "mremove-earliest")), writer("kept"),
                                   MegatronDocumentTokenizer(str(work / "tok"), tokenizer_name_or_path=str(TOKENIZER),
                                                             eos_token="<|endoftext|>", batch_size=1000)])

    def ids_of(folder):  # per input file (= rank = corpus shard), the ids in row order
        files = sorted((work / folder).glob("*.jsonl.gz"))
        return [[json.loads(line)["id"] for line in gzip.open(p, "rt", encoding="utf-8")] for p in files]

    rows = ids_of("exact")   # what the MinHash steps saw: (file, doc) = rows[file][doc]
    native = {}              # datatrove's own survivor of each cluster: the member its .remove files keep
    removed = {(int(p.stem), int(d)) for p in (work / "mremove").glob("*.remove")
               for d in np.fromfile(p, dtype="<u4").tolist()}
    clusters = {}
    for m in members.values():
        names = frozenset(rows[f][d] for f, d in m)
        clusters[names] = rows[m[0][0]][m[0][1]]   # the earliest, which the aligned filter keeps
        native[names] = [rows[f][d] for f, d in m if (f, d) not in removed]
    kept = [i for rank in ids_of("kept") for i in rank]
    all_ids = {i for rank in rows for i in rank}
    native_kept = all_ids - {rows[f][d] for f, d in removed}
    return {"kept": kept, "tokens": per_document(kept, [p.with_suffix("") for p in sorted((work / "tok").glob("*.idx"))]),
            "clusters": clusters, "native": native, "native_kept": native_kept}


def per_document(ids: list[str], prefixes: list[Path]) -> dict[str, tuple[bytes, int]]:
    """id -> (digest, length) of its token sequence (the .bin slice its .idx entry names), the documents being
    in the shards' order; the counts must match."""
    from curation.shards import read_index
    digests = []
    for prefix in prefixes:
        dtype, lengths, pointers, _ = read_index(Path(f"{prefix}.idx"))
        data = np.memmap(f"{prefix}.bin", dtype=dtype, mode="r") if lengths.size else np.zeros(0, dtype)
        for ptr, n in zip((np.asarray(pointers) // np.dtype(dtype).itemsize).tolist(), lengths.tolist()):
            digests.append((hashlib.blake2b(np.asarray(data[ptr:ptr + n], np.int64).tobytes(),
                                            digest_size=16).digest(), n))
    assert len(digests) == len(ids), f"{len(digests)} token sequences for {len(ids)} kept documents"
    return dict(zip(ids, digests))


def compare(c: dict, d: dict) -> dict:
    """Kept ids and tokens of both sides, and the proof that datatrove's own survivor rule was the only
    difference: every id kept by one side only (under datatrove's native rule) lies in a cluster with
    the same members on both sides (curate's clusters without the documents its exact dedup removed,
    which datatrove's MinHash never sees), each side keeping exactly one member."""
    c_clusters = {}
    for m, k in c["clusters"].items():
        m = m - c["exact"]
        if len(m) > 1:
            c_clusters[m] = k
    c_kept, d_kept = set(c["kept"]), set(d["kept"])
    diff = c_kept ^ d["native_kept"]
    of = {i: m for m in d["clusters"] for i in m}
    explained = sum(1 for i in diff if i in of and of[i] in c_clusters and len(of[i] & c_kept) == 1
                    and len(d["native"][of[i]]) == 1 and len(of[i] & d["native_kept"]) == 1)
    return {
        "clusters_curate": len(c_clusters), "clusters_datatrove": len(d["clusters"]),
        "same_membership": set(c_clusters) == set(d["clusters"]),
        "one_survivor": all(len(m & c_kept) == 1 and len(m & d_kept) == 1 for m in d["clusters"]),
        "native_survivor_differs": sum(d["native"][m] != [c_clusters.get(m)] for m in d["clusters"]),
        "native_only_curate": len(c_kept - d["native_kept"]), "native_only_datatrove": len(d["native_kept"] - c_kept),
        "native_diff_explained": explained, "native_diff": len(diff),
        "aligned_survivor_same": all(d["clusters"][m] == c_clusters.get(m) for m in d["clusters"]),
        "kept_curate": len(c_kept), "kept_datatrove": len(d_kept), "kept_identical": c_kept == d_kept,
        "tokens_identical": c["tokens"] == d["tokens"],
        "tokens_differ": sum(c["tokens"].get(i) != d["tokens"].get(i) for i in c_kept | d_kept),
        "tokens_total": sum(n for _, n in c["tokens"].values()),
    }


# -- 3. the tokenize stage --------------------------------------------------------------------------
def tokenize_stage(texts: list[str], out: Path, rounds: int) -> tuple[float, float, int]:
    """(seconds of curate's tokenize step + shard writer, of bare encode_batch, tokens), summed over
    `rounds` passes, the two alternating on every batch of 1000 documents."""
    from tokenizers import Tokenizer

    from curation.core.record import Record
    from curation.core.vocab import Vocabulary
    from curation.shards import IndexedWriter
    from curation.steps.text.tokenize import TextTokenizer

    vocab, bare = Vocabulary.load(VOCAB), Tokenizer.from_file(str(TOKENIZER))
    ours = theirs = 0.0
    tokens = 0
    for r in range(rounds):
        step, writer = TextTokenizer(vocab, batch_size=1000, source="en"), IndexedWriter(out / f"stage{r}")
        for i in range(0, len(texts), 1000):
            batch = [Record(str(j), "en", t) for j, t in enumerate(texts[i:i + 1000], i)]
            start = time.perf_counter()
            for rec in step.run(batch):
                writer.add(rec.shards[""][0])
                tokens += rec.shards[""][0].size if r == 0 else 0
            ours += time.perf_counter() - start
            start = time.perf_counter()
            bare.encode_batch(texts[i:i + 1000], add_special_tokens=False)
            theirs += time.perf_counter() - start
        writer.close()
    return ours, theirs, tokens


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--docs", type=int, default=32000, help="documents in the end-to-end corpus (>= 30,000)")
    ap.add_argument("--rounds", type=int, default=3, help="passes of the tokenize-stage comparison")
    ap.add_argument("--report", default=str(REPO / "reports" / "benchmarks" / "text.md"))
    args = ap.parse_args()
    if not SHARED.is_dir():
        print(f"skipped: {SHARED} is absent (the benchmark needs ../shared/data)")
        return
    os.environ.setdefault("RAY_TMPDIR", tempfile.mkdtemp(prefix="crb-", dir="/tmp"))
    work = Path(tempfile.mkdtemp(prefix="curate-bench-"))
    try:
        base = real_docs()
        fs = filter_stage([d["text"] for d in base], work)
        shards = scaled_corpus(args.docs)
        n_docs = sum(map(len, shards))
        corpus = work / "corpus"
        write_shards(shards, corpus)
        n_bytes = sum(p.stat().st_size for p in corpus.glob("*.jsonl.gz"))
        start = time.perf_counter()
        c_side = curate_e2e(corpus, work / "curate-out", work)
        t_curate = time.perf_counter() - start
        c_steps = curate_step_seconds(work / "curate-out")
        start = time.perf_counter()
        d_side = datatrove_e2e(corpus, work / "dt")
        t_dt = time.perf_counter() - start
        same = compare(c_side, d_side)
        print(json.dumps(same, indent=1), flush=True)
        import pyarrow.parquet as pq
        texts = [t for p in sorted((work / "curate-out" / "processed" / "en").glob("*.parquet"))
                 for t in pq.read_table(p).column("text").to_pylist()]
        t_ours, t_bare, stage_tokens = tokenize_stage(texts, work, args.rounds)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    write_report(args, len(base), fs, n_docs, n_bytes, (t_curate, same, c_steps),
                 (t_dt, dict(STAGE_SECONDS)), (t_ours, t_bare, stage_tokens, len(texts)))


def write_report(args, n_real, fs, n_docs, n_bytes, curate, dt, stage) -> None:
    from tests.benchmarks.text_report import render
    text = render(args, n_real, fs, n_docs, n_bytes, curate, dt, stage, CORPUS, SHARDS)
    Path(args.report).parent.mkdir(parents=True, exist_ok=True)
    Path(args.report).write_text(text)
    print(text)
    same = curate[1]
    assert same["kept_identical"] and same["tokens_identical"], "kept documents or tokens differ between the two sides"


if __name__ == "__main__":
    sys.exit(main())
