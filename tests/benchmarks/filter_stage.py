"""One measurement of the quality-filter stage in a fresh process (run by bench_text.py).

    python tests/benchmarks/filter_stage.py MODE TEXTS.jsonl RESULT.json

MODE: `datatrove` (its four filters' `filter()`, as a datatrove pipeline calls them), `old` (curate's
step before the fast filters: datatrove's `filter()` with one spaCy pass shared per document, the
word_cache of commit OLD_COMMIT, loaded from git), `new` (curate's DatatroveFilter steps now). All
run the chain GopherRepetition → GopherQuality → C4Quality → FineWebQuality (defaults) over the
same documents and report wall and CPU seconds, a digest of every document's verdicts, reasons and
final text, and for `new` the splitter's coverage. `new` runs the documents twice: the first pass
starts with empty memos (like a fresh worker), the second shows the steady state.
"""
from __future__ import annotations

import hashlib
import json
import subprocess
import sys
import time
import types
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))
OLD_COMMIT = "0c63dce"  # the last commit with the one-pass spaCy word cache
KINDS = ["gopher_repetition", "gopher_quality", "c4_quality", "fineweb_quality"]
CLASSES = ["GopherRepetitionFilter", "GopherQualityFilter", "C4QualityFilter", "FineWebQualityFilter"]


def datatrove_chain(share_passes: bool):
    from datatrove.data import Document
    from datatrove.pipeline import filters as dt_filters
    filters = [getattr(dt_filters, c)() for c in CLASSES]
    if share_passes:
        source = subprocess.run(["git", "-C", str(REPO), "show", f"{OLD_COMMIT}:curation/steps/text/word_cache.py"],
                                capture_output=True, text=True, check=True).stdout
        old = types.ModuleType("old_word_cache")
        exec(compile(source, "old_word_cache.py", "exec"), old.__dict__)  # noqa: S102 - that commit's module, from git
        old.share_spacy_passes("eng")

    def chain(text: str):
        doc, trail = Document(text=text, id="x"), []
        for kind, f in zip(KINDS, filters):
            verdict = f.filter(doc)
            if verdict is True:
                trail.append(True)
                continue
            trail.append(verdict[1] if isinstance(verdict, tuple) else kind)
            break
        return trail, doc.text
    return chain


def curate_chain():
    from curation.core.record import Drop, Record
    from curation.recipe import schema
    from curation.steps.text.filters.document import DatatroveFilter
    models = [schema.GopherRepetitionFilter, schema.GopherQualityFilter, schema.C4QualityFilter,
              schema.FineWebQualityFilter]
    steps = [DatatroveFilter(m(type=k), source="en") for k, m in zip(KINDS, models)]

    def chain(text: str):
        record, trail = Record("x", "en", text), []
        for step in steps:
            verdict = step.keep(record)
            if verdict is True:
                trail.append(True)
                continue
            trail.append(verdict.reason if isinstance(verdict, Drop) else step.name)
            break
        return trail, record.text
    return chain


def timed(chain, texts: list[str]) -> dict:
    digest, kept = hashlib.sha256(), 0
    wall, cpu = time.perf_counter(), time.process_time()
    for text in texts:
        trail, final = chain(text)
        kept += trail == [True] * len(KINDS)
        digest.update(json.dumps([trail, final]).encode())
    return {"seconds": time.perf_counter() - wall, "cpu": time.process_time() - cpu, "kept": kept,
            "digest": digest.hexdigest()}


def main() -> None:
    mode, texts_path, result_path = sys.argv[1:4]
    texts = [json.loads(line)["text"] for line in open(texts_path, encoding="utf-8")]
    chain = curate_chain() if mode == "new" else datatrove_chain(share_passes=mode == "old")
    chain("Warm-up: the spaCy pipeline and the filters load here, outside the timing. It is short.")
    result = {"mode": mode, "docs": len(texts), "first": timed(chain, texts)}
    if mode == "new":
        from curation.steps.text.filters.word_cache import WordCache
        splitter = WordCache.for_language("eng").splitter
        result["coverage"] = {"chunks_seen": splitter.chunks_seen, "distinct_fast": splitter.chunks_fast,
                              "distinct_spacy": splitter.chunks_spacy, "texts_delegated": splitter.texts_delegated}
        result["second"] = timed(chain, texts)
    Path(result_path).write_text(json.dumps(result))


if __name__ == "__main__":
    main()
