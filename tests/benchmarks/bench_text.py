"""Side-by-side: curate's text path vs the equivalent datatrove pipeline vs bare `tokenizers`.

Same corpus (English documents from ../shared/data/web_text), same filters (datatrove's Gopher
repetition and quality, C4 and FineWeb quality filters), same tokenizer.json, one run:

1. single process, one shard after another (per-core throughput, no scheduler in the way):
   curate's step chain (read → normalize → filters → tokenize → Megatron shard) against datatrove's
   JsonlReader → the same filters → MegatronDocumentTokenizer under LocalPipelineExecutor(workers=1);
2. end to end with 2 workers: `curate run` (embedded Ray) against LocalPipelineExecutor(workers=2);
3. the tokenization stage: curate's tokenize step + shard writer against bare `encode_batch` on the
   same surviving documents (the limit).

Usage: .venv/bin/python tests/benchmarks/bench_text.py [--repeat 3]  → reports/benchmarks/text.md
Needs the bench extra: pip install -e '.[test,bench]'.
Timings vary on shared machines: the report gives the best of N runs and the ratios.
"""
from __future__ import annotations

import argparse
import gzip
import json
import os
import platform
import shutil
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
SHARED = REPO.parent / "shared" / "data" / "web_text"
VOCAB = REPO / "tokenizers" / "curate-demo-v1.yaml"
TOKENIZER = REPO / "tokenizers" / "curate-demo-bpe.json"
FILTERS = ["gopher_repetition", "gopher_quality", "c4_quality", "fineweb_quality"]
CORPUS = ["news_articles_en.jsonl.gz", "cc_main_2019_30_extract.jsonl.gz", "c4_en_sample.jsonl.gz",
          "parlspeech_sample_en.jsonl.gz"]
SHARDS = 4


def build_corpus(folder: Path) -> tuple[int, int]:
    docs = []
    for name in CORPUS:
        for i, line in enumerate(gzip.open(SHARED / name, "rt", encoding="utf-8")):
            r = json.loads(line)
            if isinstance(r.get("text"), str) and r["text"].strip():
                docs.append({"id": f"{name.split('.')[0]}-{i}", "text": r["text"]})
    folder.mkdir(parents=True, exist_ok=True)
    for s in range(SHARDS):
        with gzip.open(folder / f"part-{s:02d}.jsonl.gz", "wt", encoding="utf-8") as f:
            for d in docs[s::SHARDS]:
                f.write(json.dumps(d) + "\n")
    return len(docs), sum(len(d["text"].encode()) for d in docs)


def recipe(folder: Path, corpus: Path) -> Path:
    flist = ", ".join(f"{{type: {t}}}" for t in FILTERS)
    p = folder / "bench.yaml"
    p.write_text(f"name: bench\nvocabulary: {VOCAB}\ndedup: {{exact: null}}\ntokenize_batch_size: 1000\n"
                 f"sources:\n  - name: en\n    license: MIT\n    input: {{paths: ['{corpus}/*.jsonl.gz'], id_field: id}}\n"
                 f"    normalize: {{nfc: false, ftfy: false}}\n    filters: [{flist}]\n")
    return p


def curate_single(corpus: Path, out: Path) -> tuple[int, int]:
    """curate's steps in this process, shard by shard, as a Ray task runs them."""
    from curation.core.record import QuarantineSink
    from curation.core.vocab import Vocabulary
    from curation.recipe import schema
    from curation.shards import IndexedWriter
    from curation.steps.text.modality import build_filter
    from curation.steps.text.read import JsonlReader
    from curation.steps.text.tokenize import TextTokenizer

    vocab = Vocabulary.load(VOCAB)
    docs = tokens = 0
    for path in sorted(corpus.glob("*.jsonl.gz")):
        sink = QuarantineSink()
        stream = JsonlReader(path, text_field="text", id_field="id", metadata_fields=[], shard_label=path.name,
                             source="en", sink=sink).run()
        for t in FILTERS:
            cfg = schema.Source.model_validate({"name": "en", "input": {"paths": ["x"]},
                                                "filters": [{"type": t}]}).filters[0]
            stream = build_filter(cfg, source="en", sink=sink, base_dir=REPO).run(stream)
        stream = TextTokenizer(vocab, batch_size=1000, source="en", sink=sink).run(stream)
        w = IndexedWriter(out / path.stem)
        for rec in stream:
            w.add(rec.tokens)
            docs += 1
            tokens += rec.tokens.size
        w.close()
    return docs, tokens


def datatrove_pipeline(corpus: Path, out: Path, workers: int) -> tuple[int, int]:
    from datatrove.executor import LocalPipelineExecutor
    from datatrove.pipeline.filters import (
        C4QualityFilter,
        FineWebQualityFilter,
        GopherQualityFilter,
        GopherRepetitionFilter,
    )
    from datatrove.pipeline.readers import JsonlReader
    from datatrove.pipeline.tokens import MegatronDocumentTokenizer

    pipeline = [JsonlReader(str(corpus), glob_pattern="*.jsonl.gz"),
                GopherRepetitionFilter(), GopherQualityFilter(), C4QualityFilter(), FineWebQualityFilter(),
                MegatronDocumentTokenizer(str(out / "tok"), tokenizer_name_or_path=str(TOKENIZER),
                                          eos_token="<|endoftext|>", batch_size=1000)]
    LocalPipelineExecutor(pipeline, tasks=SHARDS, workers=workers, logging_dir=str(out / "logs"),
                          skip_completed=False).run()
    import numpy as np
    docs = tokens = 0
    for idx in (out / "tok").glob("*.idx"):
        from curation.shards import read_index
        _, lengths, _, _ = read_index(idx)
        docs += lengths.size
        tokens += int(np.asarray(lengths).sum())
    return docs, tokens


def curate_ray(corpus: Path, out: Path, workers: int, work: Path) -> tuple[int, int]:
    from curation.commands.run import run
    res = run(recipe(work, corpus), out, workers=workers, progress=False)
    t = res.rows["tokens"][0]
    return t["documents"], t["total_tokens"]


def tokenize_stage(texts: list[str], out: Path) -> tuple[float, float]:
    """(seconds for curate's tokenize step + shard writer, seconds for bare encode_batch)."""
    from curation.core.record import Record
    from curation.core.vocab import Vocabulary
    from curation.shards import IndexedWriter
    from curation.steps.text.tokenize import TextTokenizer
    from tokenizers import Tokenizer

    vocab = Vocabulary.load(VOCAB)
    records = [Record(str(i), "en", t) for i, t in enumerate(texts)]
    start = time.perf_counter()
    w = IndexedWriter(out / "stage")
    for rec in TextTokenizer(vocab, batch_size=1000, source="en").run(records):
        w.add(rec.tokens)
    w.close()
    ours = time.perf_counter() - start
    tok = Tokenizer.from_file(str(TOKENIZER))
    start = time.perf_counter()
    for i in range(0, len(texts), 1000):
        tok.encode_batch(texts[i:i + 1000], add_special_tokens=False)
    return ours, time.perf_counter() - start


def best(fn, repeat: int):
    times, result = [], None
    for _ in range(repeat):
        start = time.perf_counter()
        result = fn()
        times.append(time.perf_counter() - start)
    return min(times), result


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--report", default=str(REPO / "reports" / "benchmarks" / "text.md"))
    args = ap.parse_args()
    if not SHARED.is_dir():
        print(f"skipped: {SHARED} is absent (the benchmark needs ../shared/data)")
        return
    os.environ.setdefault("RAY_TMPDIR", tempfile.mkdtemp(prefix="crb-", dir="/tmp"))
    work = Path(tempfile.mkdtemp(prefix="curate-bench-"))
    try:
        corpus = work / "corpus"
        n_docs, n_bytes = build_corpus(corpus)
        # warm-up: spaCy and LID models load once per process on both sides
        curate_single(corpus, work / "warm")
        counter = iter(range(10_000))
        t_cs, (cd, ct) = best(lambda: curate_single(corpus, work / f"cs{next(counter)}"), args.repeat)
        t_ds, (dd, dt) = best(lambda: datatrove_pipeline(corpus, work / f"ds{next(counter)}", 1), args.repeat)
        ray_out = work / "ray-run"
        t_cr, (rd, rt) = best(lambda: curate_ray(corpus, ray_out / str(next(counter)), 2, work), args.repeat)
        t_dr, (dd2, dt2) = best(lambda: datatrove_pipeline(corpus, work / f"dr{next(counter)}", 2), args.repeat)
        import pyarrow.parquet as pq
        texts = [t for p in sorted(next(ray_out.iterdir()).glob("processed/en/*.parquet"))
                 for t in pq.read_table(p).column("text").to_pylist()]
        stage = [tokenize_stage(texts, work / f"ts{i}") for i in range(args.repeat)]
        t_ours, t_bare = min(s[0] for s in stage), min(s[1] for s in stage)
        stage_tokens = rt
    finally:
        shutil.rmtree(work, ignore_errors=True)

    def row(name, secs, docs_in, tokens):
        return f"| {name} | {secs:.2f} | {docs_in / secs:,.0f} | {tokens / secs:,.0f} |"

    lines = [
        "# Text path: curate vs datatrove vs bare tokenizers", "",
        f"Produced by `.venv/bin/python tests/benchmarks/bench_text.py --repeat {args.repeat}` on "
        f"{time.strftime('%Y-%m-%d')}, {platform.machine()}, {os.cpu_count()} CPUs, Python "
        f"{platform.python_version()}; best of {args.repeat} runs each.", "",
        f"Corpus: {n_docs:,} English documents ({n_bytes / 1e6:.1f} MB) from `../shared/data/web_text/` "
        f"({', '.join(CORPUS)}), in {SHARDS} shards. Filters on both sides: datatrove's "
        f"GopherRepetition, GopherQuality, C4Quality, FineWebQuality (defaults); tokenizer: "
        f"`tokenizers/curate-demo-bpe.json`; output: Megatron `.bin`/`.idx`.", "",
        f"Both sides kept the same documents: curate {cd:,} docs / {ct:,} tokens (EOD included), "
        f"datatrove {dd:,} docs / {dt:,} tokens.", "",
        "docs/s counts input documents; tokens/s counts tokens written.", "",
        "| pipeline | seconds | docs/s | tokens/s |", "|---|---|---|---|",
        row("curate, 1 process (step chain)", t_cs, n_docs, ct),
        row("datatrove, LocalPipelineExecutor workers=1", t_ds, n_docs, dt),
        row("curate run, embedded Ray, --workers 2", t_cr, n_docs, rt),
        row("datatrove, LocalPipelineExecutor workers=2", t_dr, n_docs, dt2), "",
        "## Ratios", "",
        f"- curate / datatrove, 1 process: **{t_ds / t_cs:.2f}×** (goal ≥ 1.2×)",
        f"- curate / datatrove, 2 workers, end to end (Ray start-up included): **{t_dr / t_cr:.2f}×**",
        f"- tokenization stage, curate (tokenize + shard writer) / bare `encode_batch` on the same "
        f"{len(texts):,} documents: **{t_bare / t_ours:.2f}** of the bare tokenizer's throughput "
        f"({stage_tokens / t_ours:,.0f} vs {stage_tokens / t_bare:,.0f} tokens/s; goal ≥ 0.8)", "",
    ]
    Path(args.report).parent.mkdir(parents=True, exist_ok=True)
    Path(args.report).write_text("\n".join(lines))
    print("\n".join(lines))


if __name__ == "__main__":
    sys.exit(main())
