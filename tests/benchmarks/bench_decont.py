"""Decontamination quality and speed on real data: curate vs datatrove's n-gram decontamination.

Benchmarks: GSM8K, MMLU, ARC-Challenge, TruthfulQA, HumanEval and BBH from ../shared/data/benchmarks.
Corpus: real English documents from ../shared/data/web_text, with known contaminations planted
into copies of randomly chosen documents (the item inserted at a random word boundary), per kind:

- verbatim        the whole item (question and answer fields)
- light-edit      the item with 3% of its words replaced (a light paraphrase)
- partial-70      the first 70% of the item's words
- partial-35      the first 35% (below the 0.5 rule by design: a measure of what it misses)
- template        NOT contamination: a benchmark's instruction template ("Answer the following
                  multiple choice question ... Which of the following ...") around an unrelated
                  question, the false positives a template match produces

Truth is the plant; precision counts flags on templates and on untouched real documents as false.
Speed, one process each, same inputs: index build (all items) and filter throughput (documents/s).
datatrove's `NGramsDecontIndexer` needs lighteval and the Hugging Face hub to read tasks, so its index
is built here with its own functions (simplify_text, its word tokenizer, 13-grams, xxhash) and saved in
its format; `NGramsDecontFilter` then runs unmodified. datatrove removes a document on any single
shared 13-gram; curate flags one when it holds 0.5 of one item's 13-grams (Apertus 1.5).

Usage: .venv/bin/python tests/benchmarks/bench_decont.py → reports/benchmarks/decontamination.md
"""
from __future__ import annotations

import gzip
import json
import os
import platform
import random
import shutil
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))
DATA = REPO.parent / "shared" / "data"
CORPUS = ["news_articles_en.jsonl.gz", "cc_main_2019_30_extract.jsonl.gz", "c4_en_sample.jsonl.gz",
          "parlspeech_sample_en.jsonl.gz"]
BENCHMARKS = {  # name: (file, fields, id field)
    "gsm8k": ("gsm8k_test.jsonl.gz", ["question", "answer"], "idx"),
    "mmlu": ("mmlu_test.jsonl.gz", ["question", "choices"], None),
    "arc_challenge": ("arc_challenge_test.jsonl.gz", ["question", "choices"], "id"),
    "truthfulqa": ("truthfulqa.jsonl.gz", ["Question", "Best Answer", "Correct Answers"], None),
    "humaneval": ("humaneval.jsonl.gz", ["prompt", "canonical_solution"], "task_id"),
    "bbh": ("bbh.jsonl.gz", ["input", "target"], None),
}
PER_KIND = 80
N = 13
TEMPLATE = ("The following are multiple choice questions (with answers). Answer the following multiple choice "
            "question. Think step by step and then finish your answer with the letter of the correct option. "
            "Which of the following is the best answer to the question below? {q} Options: A, B, C, D. Answer:")


def real_docs() -> list[dict]:
    docs = []
    for name in CORPUS:
        for i, line in enumerate(gzip.open(DATA / "web_text" / name, "rt", encoding="utf-8")):
            r = json.loads(line)
            if isinstance(r.get("text"), str) and len(r["text"].split()) >= 50:
                docs.append({"id": f"{name.split('.')[0]}-{i}", "text": r["text"]})
    return docs


def items():
    from curation.corpus.decont.benchmarks import load_items
    return [it for name, (f, fields, idf) in BENCHMARKS.items()
            for it in load_items(name, DATA / "benchmarks" / f, fields, idf)]


def insert(doc: str, snippet: str, rng: random.Random) -> str:
    words = doc.split(" ")
    at = rng.randrange(len(words) + 1)
    return " ".join(words[:at] + [snippet] + words[at:])


def plant(docs: list[dict], its: list, rng: random.Random) -> tuple[list[dict], dict[str, str]]:
    """Corpus with planted copies; truth: doc id -> kind."""
    long_items = [it for it in its if len(it.text.split()) >= 40]
    out, truth = list(docs), {}
    for kind in ("verbatim", "light-edit", "partial-70", "partial-35", "template"):
        for k in range(PER_KIND):
            base, it = rng.choice(docs), rng.choice(long_items)
            words = it.text.split()
            if kind == "verbatim":
                snippet = it.text
            elif kind == "light-edit":
                snippet = " ".join(w if rng.random() > 0.03 else f"w{rng.randrange(10**6)}" for w in words)
            elif kind == "partial-70":
                snippet = " ".join(words[:int(len(words) * 0.7)])
            elif kind == "partial-35":
                snippet = " ".join(words[:int(len(words) * 0.35)])
            else:
                other = rng.choice(docs)["text"].split()
                snippet = TEMPLATE.format(q=" ".join(other[:30]) + "?")
            rid = f"{base['id']}~{kind}-{k}"
            out.append({"id": rid, "text": insert(base["text"], snippet, rng)})
            truth[rid] = kind
    return out, truth


def run_curate(docs, its, work: Path):
    from curation.corpus.decont.index import build_index, match
    from curation.steps.text.minhash import Shingler
    t = time.perf_counter()
    table = build_index(its, N, 4, work / "curate-index")
    t_index = time.perf_counter() - t
    ngrams = table.column("ngrams").to_pylist()
    t = time.perf_counter()
    s = Shingler(N)
    found = match([s(d["text"]) for d in docs], work / "curate-index", 4)
    flagged = {d["id"] for d, f in zip(docs, found)
               if f and max(c / ngrams[i] for i, c in f.items()) >= 0.5}
    return flagged, t_index, time.perf_counter() - t


def run_datatrove(docs, its, work: Path):
    from datatrove.data import Document
    from datatrove.pipeline.decont import NGramsDecontConfig, NGramsDecontFilter
    from datatrove.utils.hashing import create_hash_func
    from datatrove.utils.text import ngrams, simplify_text
    from datatrove.utils.word_tokenizers import load_word_tokenizer
    cfg = NGramsDecontConfig(n_grams=N, find_query_ngrams=True, find_overlap_ngrams=False)
    tok, h = load_word_tokenizer("en"), create_hash_func(cfg.hash_config)
    t = time.perf_counter()
    per = {}
    for it in its:  # what NGramsDecontIndexer.compute_hashes does for a label without a query
        words = tok.word_tokenize(simplify_text(it.text, cfg.norm_config))
        per.setdefault(it.benchmark, set()).update(h(" ".join(g)) for g in ngrams(words, N))
    (work / "dt-index").mkdir()
    for name, hs in per.items():
        np.array(sorted(hs), dtype=np.uint64).tofile(work / "dt-index" / f"{name}.index.hashes")
    t_index = time.perf_counter() - t
    f = NGramsDecontFilter(str(work / "dt-index"), config=cfg)
    t = time.perf_counter()
    flagged = set()
    for d in docs:
        keep = f.filter(Document(text=d["text"], id=d["id"]))
        if keep is not True:
            flagged.add(d["id"])
    return flagged, t_index, time.perf_counter() - t


def quality(flagged: set[str], truth: dict[str, str], n_docs: int) -> dict:
    kinds = ["verbatim", "light-edit", "partial-70", "partial-35", "template"]
    recall = {k: sum(1 for i, kk in truth.items() if kk == k and i in flagged) / PER_KIND for k in kinds}
    contaminated = {i for i, k in truth.items() if k != "template"}
    tp = len(flagged & contaminated)
    return {"recall": recall, "precision": tp / max(len(flagged), 1), "flagged": len(flagged),
            "false_real": len(flagged - set(truth)), "false_template": sum(truth.get(i) == "template" for i in flagged)}


def main() -> None:
    if not DATA.is_dir():
        print(f"skipped: {DATA} is absent (the benchmark needs ../shared/data)")
        return
    rng = random.Random(0)
    docs, its = real_docs(), items()
    corpus, truth = plant(docs, its, rng)
    work = Path(tempfile.mkdtemp(prefix="curate-decont-"))
    try:
        ours, oi, om = run_curate(corpus, its, work)
        theirs, ti, tm = run_datatrove(corpus, its, work)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    q_ours, q_theirs = quality(ours, truth, len(corpus)), quality(theirs, truth, len(corpus))
    kinds = list(q_ours["recall"])
    lines = [
        "# Decontamination: curate vs datatrove", "",
        f"Produced by `.venv/bin/python tests/benchmarks/bench_decont.py` on {time.strftime('%Y-%m-%d')}, "
        f"{platform.machine()}, {os.cpu_count()} CPUs, Python {platform.python_version()}; one process each.", "",
        f"Benchmarks: {', '.join(BENCHMARKS)} from `../shared/data/benchmarks` ({len(its):,} items). Corpus: "
        f"{len(docs):,} real English documents from `../shared/data/web_text` plus {len(truth):,} planted copies "
        f"({PER_KIND} per kind, see the script's docstring). 13-grams on both sides.", "",
        "## Quality", "",
        "| | " + " | ".join(f"recall {k}" for k in kinds[:-1]) + " | template flagged | untouched real docs flagged | precision |",
        "|---|" + "---|" * (len(kinds) + 2),
        *[f"| {name} | " + " | ".join(f"{q['recall'][k]:.3f}" for k in kinds[:-1]) +
          f" | {q['false_template']} / {PER_KIND} | {q['false_real']} | {q['precision']:.3f} |"
          for name, q in (("curate (0.5 of one item's 13-grams)", q_ours),
                          ("datatrove (any shared 13-gram)", q_theirs))], "",
        "Precision counts every flag outside the contaminated plants as false, including untouched real documents "
        "that share at least one 13-gram with a benchmark item, which a "
        "reviewer would judge. The template plants share no 13-gram with these benchmarks' items (their "
        "instructions are not part of the items), so neither side flags them.", "",
        "partial-35 holds at most ~(0.35·L−12)/(L−12) of an item's 13-grams, under the 0.5 rule for every item: "
        "curate misses it by design (the Apertus setting); datatrove's any-hit rule catches it at the price of "
        "flagging documents that share one 13-gram with any item (templates, quotations, boilerplate).", "",
        "## Speed", "",
        "| | index build s | filter s | documents/s |", "|---|---|---|---|",
        f"| curate | {oi:.2f} | {om:.2f} | {len(corpus) / om:,.0f} |",
        f"| datatrove | {ti:.2f} | {tm:.2f} | {len(corpus) / tm:,.0f} |", "",
        f"- index build: curate **{ti / oi:.2f}×** datatrove's speed; filter throughput: **{tm / om:.2f}×**",
        "- curate's filter computes each document's n-grams once with the memoised tokenizer shared with MinHash, "
        "then looks them up per index shard with numpy; datatrove runs spaCy on every document and looks up each "
        "n-gram in a Python dict. In `curate run` the matching runs per shard in parallel over the index shards.", "",
    ]
    report = REPO / "reports" / "benchmarks" / "decontamination.md"
    report.write_text("\n".join(lines))
    print("\n".join(lines))


if __name__ == "__main__":
    sys.exit(main())
