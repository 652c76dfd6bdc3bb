"""Quality classifiers: training time, scoring throughput against datatrove, held-out metrics, and
the kept share per language after top-10% selection, in one run.

1. Training: `curate classifier train` on the demo specs (recipes/classifiers/), wall time of the
   fastText part (one thread, in its clean child process) and of the whole command.
2. Scoring, one core, same model (the demo quality model), same documents (real text from
   ../shared/data/web_text: news articles, parliamentary speeches in de/en/es/nl, a Common Crawl
   extract): curate's `quality` step (records in batches, one `predict` per document) against datatrove's
   `FastTextClassifierFilter` (one `predict` per document, scores saved in metadata, nothing removed: `remove_labels` at 2.0),
   which is given `newline_replacement=" "` so that both see the same words; the report checks that
   both give the same score per document. Records carry their language, so neither side runs LID;
   the step's own LID (when no language filter ran before it) is timed separately.
3. Held-out precision/recall/AUC per language, from the model's card.
4. Top-10% per language by the real selection phase: the same files as sources of one recipe (a
   `quality` step with its own LID, `select: {top_fraction: 0.1, by: language}` in one pool, exact dedup
   before it), run with the local executor; its thresholds are checked against a full sort of the
   documents that reached the `select` step, and the ties it broke are counted.

The demo model judges only the languages its card covers (de, en: `curation.steps.text.filters.coverage`); the
step quarantines the documents of other languages unscored, so parts 2 and 4 take the documents of the
covered languages (part 2 by the language ID's label, part 4 by a `language` filter before the step).

Usage: .venv/bin/python tests/benchmarks/bench_quality.py [--repeat 3]  → reports/benchmarks/quality_classifier.md
(`--only-selection` reruns part 4 alone and replaces its section, leaving the timed sections as measured).
Needs the bench extra (datatrove's filter needs `fasteners`). Timings vary on shared machines: best of N.
"""
from __future__ import annotations

import argparse
import gzip
import json
import math
import os
import platform
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))
os.environ["HF_HOME"] = tempfile.mkdtemp(prefix="hf-")  # datatrove copies the model into its cache there
SHARED = Path(os.environ.get("CURATE_SHARED_DATA", REPO.parent / "shared" / "data")) / "web_text"
SPECS = REPO / "recipes" / "classifiers"
MODEL = SPECS / "models" / "demo-quality.ftz"
CORPUS = {"news_articles_en.jsonl.gz": None, "cc_main_2019_30_extract.jsonl.gz": None,
          "parlspeech_sample_de.jsonl.gz": "de", "parlspeech_sample_en.jsonl.gz": "en",
          "parlspeech_sample_es.jsonl.gz": "es", "parlspeech_sample_nl.jsonl.gz": "nl"}
REPORT = REPO / "reports" / "benchmarks" / "quality_classifier.md"


def load_corpus() -> list[tuple[str, str]]:
    """(text, file) for every non-empty document."""
    docs = []
    for name in CORPUS:
        for line in gzip.open(SHARED / name, "rt", encoding="utf-8"):
            text = json.loads(line).get("text") or ""
            if text.strip():
                docs.append((text, name))
    return docs


def covered() -> list[str]:
    """The languages the demo quality model's card covers (the only ones its step scores)."""
    return json.loads((SPECS / "models" / "demo-quality.card.json").read_text())["languages"]["covered"]


def best(fn, repeat: int) -> tuple[float, object]:
    times, out = [], None
    for _ in range(repeat):
        t = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t)
    return min(times), out


def bench_training(repeat: int) -> list[dict]:
    from curation.classify import train_classifier
    rows = []
    for spec in ("demo-quality", "demo-toxicity"):
        fast, wall, shas = [], [], set()
        for _ in range(repeat):
            with tempfile.TemporaryDirectory() as d:
                t = time.perf_counter()
                tr = train_classifier(SPECS / f"{spec}.yaml", d)
                wall.append(time.perf_counter() - t)
                fast.append(tr.seconds)
                shas.add(tr.card["model"]["sha256"])
        rows.append({"spec": spec, "lines": tr.card["training_file"]["lines"], "bytes": tr.card["model"]["bytes"],
                     "fasttext_s": min(fast), "wall_s": min(wall), "sha256": tr.card["model"]["sha256"][:16],
                     "identical": len(shas) == 1, "runs": repeat})
    return rows


def bench_scoring(docs, languages, repeat: int) -> dict:
    from datatrove.data import Document
    from datatrove.pipeline.filters import FastTextClassifierFilter

    from curation.core.record import Record
    from curation.recipe.filters import QualityScore
    from curation.steps.text.filters.quality import QualityStep

    def ours(lid: bool):
        step = QualityStep(QualityScore(type="quality", model=str(MODEL)))
        recs = [Record(id=str(i), source="b", text=t, meta={} if lid else {"language": languages[i]})
                for i, (t, _) in enumerate(docs)]
        return [r.meta["quality_score"] for r in step.run(recs)]

    # remove_labels above any probability: nothing is removed (datatrove 0.10.1 fails on neither list given)
    dt = FastTextClassifierFilter(str(MODEL), remove_labels=[("hq", 2.0)], newline_replacement=" ",
                                  save_labels_in_metadata=True)
    dt.model  # noqa: B018 - load (and copy into datatrove's cache) outside the timing

    def theirs():
        out = []
        for i, (t, _) in enumerate(docs):
            d = Document(text=t, id=str(i), metadata={})
            dt.filter(d)
            out.append(d.metadata.get("__label__hq"))
        return out

    t_ours = t_dt = t_lid = float("inf")
    for _ in range(repeat):  # interleaved, so that a busy moment of the shared machine hits both
        t, s_ours = best(lambda: ours(False), 1)
        t_ours = min(t_ours, t)
        t, s_dt = best(theirs, 1)
        t_dt = min(t_dt, t)
    t_lid, _ = best(lambda: ours(True), 1)
    diffs = [abs(a - b) for a, b in zip(s_ours, s_dt)]
    # datatrove's str.strip() also removes Unicode spaces (NBSP...) at the ends, which fastText keeps in a word
    nbsp = sum(d != 0 and t.strip() != t.strip(" \t\n\v\f\r\0") for d, (t, _) in zip(diffs, docs))
    return {"n": len(docs), "ours": t_ours, "datatrove": t_dt, "ours_lid": t_lid,
            "same": sum(d == 0 for d in diffs), "max_diff": max(diffs), "nbsp": nbsp, "scores": s_ours,
            "words": sum(len(t.split()) for t, _ in docs)}


def bench_selection(fraction: float = 0.1) -> dict:
    """The corpus through `curate run`: one source per file, quality scores, top `fraction` per language."""
    import pyarrow.parquet as pq

    from curation.commands.run import run
    from curation.core.layout import drops_path, processed_path
    work = Path(tempfile.mkdtemp(prefix="bench-select-"))
    # licences as ../shared/data/SOURCES.md lists them (mixed; a benchmark run ships nothing), admitted as unknown
    lines = ["name: bench-select", f"vocabulary: {REPO / 'tokenizers' / 'curate-demo-v1.yaml'}",
             "licence_policy: {admit_unknown: true}", "sources:"]
    for name in CORPUS:
        # allow_empty: the es and nl speeches are all outside the card's languages, so those sources keep nothing
        lines += [f"  - name: {name.split('.')[0]}", "    license: see ../shared/data/SOURCES.md", "    allow_empty: true",
                  f"    input: {{paths: [{SHARED / name}], id_field: id}}",
                  f"    filters: [{{type: language, languages: {covered()}}}, {{type: quality, model: {MODEL}}}]",
                  f"    select: {{top_fraction: {fraction}, by: language, field: quality_score}}"]
    (work / "recipe.yaml").write_text("\n".join(lines) + "\n")
    t = time.perf_counter()
    res = run(work / "recipe.yaml", work / "out", progress=False, executor="local")
    wall = time.perf_counter() - t
    by = defaultdict(list)      # reference: a full sort of what reached `select`
    for node in res.plan.process:
        gone = set(pq.read_table(drops_path(res.out, "exact", node.source, node.shard)).column("id").to_pylist())
        for r in pq.read_table(processed_path(res.out, node.source, node.shard), columns=["id", "meta"]).to_pylist():
            if r["id"] not in gone:
                m = json.loads(r["meta"])
                by[m["language"]].append(m["quality_score"])
    rows = sorted(res.rows["quality_thresholds"], key=lambda r: (-r["documents"], r["language"]))
    for r in rows:
        ss = sorted(by[r["language"]], reverse=True)
        r["sort_threshold"] = ss[math.ceil(fraction * len(ss)) - 1]
        r["at_or_above"] = sum(s >= r["threshold"] for s in ss)
    marker = json.loads((res.out / "work" / "markers" / "select_resolve" / "default.json").read_text())
    return {"rows": rows, "wall": wall, "documents": sum(r["documents"] for r in rows),
            "passes": marker.get("passes"), "sources": len(CORPUS), "shards": len(res.plan.process)}


SELECTION_HEADER = "## Kept share per language after top-10% selection by the selection phase (the same corpus)"


def selection_section(sel: dict) -> list[str]:
    top = sel["rows"]
    L = ["", SELECTION_HEADER, "",
          f"`curate run` on the {sel['sources']} files as sources of one recipe ({sel['shards']} shards): a `language` "
          f"filter to the languages the model's card covers ({', '.join(covered())}; the es and nl speeches are "
          "outside them, so those sources keep nothing), a `quality` step (the demo model), exact dedup, then `select: {top_fraction: 0.1, by: language}` in one "
          f"pool over all of them: {sel['documents']:,} documents reached the `select` step, thresholds found in "
          f"{sel['passes']} radix pass(es), whole run {sel['wall']:.1f} s (part 4 alone: `--only-selection`). "
          "Per language exactly ceil(0.1 n) "
          "documents are kept: the threshold is the score of the last one; of the documents scoring exactly the "
          "threshold (tied) the earliest in canonical order (recipe source order, shard, row) are kept. "
          "\"≥ threshold\" counts the documents a keep-all-ties rule would have kept.", "",
          "| language | documents | threshold | above | tied | kept | kept share | ≥ threshold | full sort agrees |",
          "|---|---:|---:|---:|---:|---:|---:|---:|---|"]
    L += [f"| {r['language']} | {r['documents']:,} | {r['threshold']:.6f} | {r['above']:,} | {r['tied']:,} | "
          f"{r['kept']:,} | {r['kept'] / r['documents']:.1%} | {r['at_or_above']:,} | "
          f"{'yes' if r['sort_threshold'] == r['threshold'] else 'NO'} |"
          for r in top if r["documents"] >= 5]
    small = [r for r in top if r["documents"] < 5]
    ties = [r["language"] for r in top if r["tied"] > 1]
    L += ["", f"{len(small)} languages with fewer than 5 documents omitted ({sum(r['documents'] for r in small)} "
          f"documents, {sum(r['kept'] for r in small)} kept: a language of n < 10 documents keeps 1). "
          + (f"Ties at the threshold in: {', '.join(ties)}. " if ties else
             "No two documents of a language share its threshold score here, so a share above 10% is the "
             "ceiling of 0.1 n on a small n, not ties. ") + "The "
          "ledger table `quality_thresholds` holds every language; the thresholds of all "
          f"{len(top)} agree with a full sort: {'yes' if all(r['sort_threshold'] == r['threshold'] for r in top) else 'NO'}.",
          ""]
    return L


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--only-selection", action="store_true",
                    help="rerun the selection part alone and replace its section of the existing report")
    args = ap.parse_args()
    repeat = args.repeat
    if not SHARED.is_dir():
        sys.exit(f"skipped: {SHARED} is absent (set CURATE_SHARED_DATA)")
    if args.only_selection:
        kept = REPORT.read_text().split("\n## Kept share per language")[0].rstrip("\n").split("\n")
        L = kept + selection_section(bench_selection())
        REPORT.write_text("\n".join(L))
        print("\n".join(L))
        return
    from curation.steps.text.filters.quality import identify_languages
    docs = load_corpus()
    languages = [lang for lang, _ in identify_languages([t for t, _ in docs])]
    keep = [i for i, lang in enumerate(languages) if lang in covered()]   # what the step scores at all
    docs, languages = [docs[i] for i in keep], [languages[i] for i in keep]
    train = bench_training(repeat)
    sc = bench_scoring(docs, languages, repeat)
    card = json.loads((SPECS / "models" / "demo-quality.card.json").read_text())
    sel = bench_selection()

    import datatrove
    import fasttext
    L = ["# Quality classifiers: training, scoring against datatrove, held-out metrics, top-10% selection",
         "", f"Command: `python tests/benchmarks/bench_quality.py --repeat {repeat}` (best of {repeat}; "
         f"Python {platform.python_version()}, {os.cpu_count()} cores shared with other sessions, "
         f"fastText bindings `{Path(fasttext.__file__).parent.name}` from fasttext-numpy2-wheel, "
         f"datatrove {datatrove.__version__ if hasattr(datatrove, '__version__') else '0.10.1'}).", "",
         "## Training (`curate classifier train`, fastText with one thread)", "",
         "| spec | training lines | model bytes | fastText s | whole command s | model sha256 (16) | identical bytes |",
         "|---|---:|---:|---:|---:|---|---|"]
    L += [f"| {r['spec']} | {r['lines']:,} | {r['bytes']:,} | {r['fasttext_s']:.2f} | {r['wall_s']:.2f} | "
          f"`{r['sha256']}` | {'yes' if r['identical'] else 'NO'}, {r['runs']} runs |" for r in train]
    L += ["", "Identical bytes over the repetitions is the determinism check (each trains from scratch). fastText runs in a child process whose allocations glibc zero-fills (see "
          "`curation/classify/fasttext_train.py`: fastText reads uninitialised memory); that fill is part "
          "of the fastText time.", "",
          f"## Scoring throughput (one core; {sc['n']:,} documents, {sc['words']:,} words; demo quality model)", "",
          "| scorer | seconds | docs/s per core | vs datatrove |", "|---|---:|---:|---:|",
          f"| curate `quality` step (batches of 256) | {sc['ours']:.3f} | "
          f"{sc['n'] / sc['ours']:,.0f} | {sc['datatrove'] / sc['ours']:.2f}x |",
          f"| datatrove `FastTextClassifierFilter` (one `predict` per document) | {sc['datatrove']:.3f} | "
          f"{sc['n'] / sc['datatrove']:,.0f} | 1.00x |",
          f"| curate `quality` step with its own LID (no language filter before it) | {sc['ours_lid']:.3f} | "
          f"{sc['n'] / sc['ours_lid']:,.0f} | {sc['datatrove'] / sc['ours_lid']:.2f}x |", "",
          f"Same score on {sc['same']:,} of {sc['n']:,} documents (largest difference {sc['max_diff']:.2e}); "
          f"{sc['nbsp']} of the {sc['n'] - sc['same']} others begin or end with Unicode whitespace (e.g. NBSP) "
          "that datatrove's `str.strip()` removes and fastText keeps as part of a word; curate scores the text as "
          "its model was trained.", "",
          "## Held-out metrics of the demo quality model (from its card; threshold 0.5)", "",
          "Demonstration data: a few hundred documents, so most languages hold one or two held-out documents.", "",
          "| language | documents | positives | precision | recall | AUC |", "|---|---:|---:|---:|---:|---:|"]
    m = card["held_out"]["metrics"]

    def f(v):
        return "n/a" if v is None else f"{v:.3f}"
    for lang, r in [("all", m["overall"]), *m["per_language"].items()]:
        L.append(f"| {lang} | {r['documents']} | {r['positives']} | {f(r['precision'])} | {f(r['recall'])} | "
                 f"{f(r['auc'])} |")
    L += selection_section(sel)
    REPORT.write_text("\n".join(L))
    print("\n".join(L))


if __name__ == "__main__":
    main()
