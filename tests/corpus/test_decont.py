"""Decontamination: index and matching, identifier-level removal, the guard, review re-admission."""
from __future__ import annotations

import json

import pytest

from curation.corpus.decont.benchmarks import Item, load_items
from curation.corpus.decont.index import build_index, match, overlap_words
from curation.steps.text.minhash import Shingler
from tests.conftest import VOCAB, english_doc, write_jsonl

QUESTIONS = [
    "Janet's ducks lay 16 eggs per day. She eats three for breakfast every morning and bakes muffins for her "
    "friends every day with four. She sells the remainder at the farmers' market daily for $2 per fresh duck egg. "
    "How much in dollars does she make every day at the farmers' market?",
    "A robe takes 2 bolts of blue fiber and half that much white fiber. How many bolts in total does it take to "
    "make the robe if the tailor wants to make a matching belt with the same amount of fiber as well?",
    "Josh decides to try flipping a house. He buys a house for $80,000 and then puts in $50,000 in repairs. "
    "This increased the value of the house by 150%. How much profit did he make in the end of the year?",
]


def test_index_matches_share_of_item_ngrams(tmp_path):
    items = [Item("b", str(i), q) for i, q in enumerate(QUESTIONS)] + [Item("b", "short", "too short")]
    table = build_index(items, 13, 3, tmp_path)
    assert table.column("ngrams").to_pylist()[-1] == 0  # fewer words than n: unindexable
    s = Shingler(13)
    half = " ".join(QUESTIONS[1].split()[:len(QUESTIONS[1].split()) // 2 + 8])
    docs = [english_doc(1) + " " + QUESTIONS[0] + " " + english_doc(2), half, english_doc(3)]
    found = match([s(d) for d in docs], tmp_path, 3)
    n0 = table.column("ngrams").to_pylist()[0]
    assert found[0] == {0: n0}           # the whole item inside a longer document
    assert 0.5 < found[1][1] / table.column("ngrams").to_pylist()[1] < 1
    assert found[2] == {}
    words = s.words(docs[0])
    marks = overlap_words(words, set(s(QUESTIONS[0]).tolist()), 13)
    assert sum(marks) == len(s.words(QUESTIONS[0]))


def test_benchmark_fields_flatten_choices(tmp_path):
    path = tmp_path / "arc.jsonl"
    path.write_text(json.dumps({"id": "q1", "question": "Why?", "choices": {"text": ["a", "b"], "label": ["A", "B"]},
                                "turns": ["one", "two"], "answer": 2}) + "\n")
    [item] = load_items("arc", path, ["question", "choices", "turns", "answer"], "id")
    assert (item.item_id, item.text) == ("q1", "Why?\na\nb\none\ntwo\n2")
    from curation.errors import InputError
    with pytest.raises(InputError, match="no field"):
        load_items("arc", path, ["prompt"], None)


def _recipe(tmp_path, extra: str = "") -> str:
    return f"""name: t
vocabulary: {VOCAB}
decontamination:
  benchmarks: [{{name: gsm, path: gsm.jsonl, fields: [question, answer], id_field: idx}}]
{extra}
sources:
  - name: web
    license: MIT
    input: {{paths: [web.jsonl], id_field: id}}
  - name: forum
    license: MIT
    input: {{paths: [forum.jsonl], id_field: id}}
"""


@pytest.mark.slow
def test_removal_is_per_sample_guarded_and_reviewable(tmp_path):
    from curation.commands.run import run
    from curation.errors import DecontaminationGuard

    (tmp_path / "gsm.jsonl").write_text("".join(json.dumps({"idx": i, "question": q, "answer": "#### 42"}) + "\n"
                                                for i, q in enumerate(QUESTIONS)))
    web = [{"id": f"w{i}", "text": english_doc(i)} for i in range(40)]
    web[5]["text"] += " " + QUESTIONS[0]                      # one contaminated sample among 40
    web[6]["text"] = english_doc(6) + " " + " ".join(QUESTIONS[2].split()[:12])  # 12 words: below any 13-gram
    write_jsonl(tmp_path / "web.jsonl", web)
    forum = [{"id": f"w{i}", "text": english_doc(100 + i)} for i in range(10)]  # same ids as web's, other texts
    for i in range(4):
        forum[i]["text"] += " " + QUESTIONS[i % 3]             # 40% of the forum is contaminated
    write_jsonl(tmp_path / "forum.jsonl", forum)
    (tmp_path / "r.yaml").write_text(_recipe(tmp_path))
    with pytest.raises(DecontaminationGuard, match=r"40\.0% of source 'forum' \(4 of 10.*gsm \(4\)"):
        run(tmp_path / "r.yaml", tmp_path / "out", progress=False)
    assert (tmp_path / "out" / "review" / "decontamination.html").is_file()  # the review exists before fixing

    (tmp_path / "r.yaml").write_text(_recipe(tmp_path, "  acknowledge: [forum]\n  false_positives: [forum/w3]"))
    res = run(tmp_path / "r.yaml", tmp_path / "out", progress=False)
    docs = {t["source"]: t["documents"] for t in res.rows["tokens"]}
    assert docs == {"web": 39, "forum": 7}  # web loses exactly w5; forum w0-w2 (w3 cleared by review)
    rows = {(d["source"], d["benchmark"]): d for d in res.rows["decontamination"]}
    assert (rows[("web", "gsm")]["removed"], rows[("web", "gsm")]["final"]) == (1, 39)
    assert (rows[("forum", "(all)")]["flagged"], rows[("forum", "(all)")]["readmitted"],
            rows[("forum", "(all)")]["removed"]) == (4, 1, 3)
    assert rows[("forum", "(all)")]["pct_removed"] == 30.0
    page = (tmp_path / "out" / "review" / "decontamination.html").read_text()
    assert "<mark>" in page and "readmitted" in page
    assert {b["benchmark"]: b["items"] for b in res.rows["benchmarks"]} == {"gsm": 3}
    report = (tmp_path / "out" / "reports" / "report.md").read_text()
    assert "## Decontamination" in report


def test_a_flagged_sample_removes_only_itself(tmp_path):
    """The Apertus 1.5 §3.4 incident: one flagged sample must never take its dataset (or namesakes) with it."""
    from curation.core.layout import drops_path
    from curation.corpus.decont.phase import DecontPhase
    from curation.steps.droplist import read_drops

    shards = [("web", "00000"), ("web", "00001"), ("forum", "00001")]
    DecontPhase().write_drops(tmp_path, shards, [{"source": "web", "shard": "00001", "id": "x7",
                                                  "reason": "contaminated:gsm"}])

    def removed_ids(out, source, shard):
        return read_drops(drops_path(out, "decont", source, shard))
    assert removed_ids(tmp_path, "web", "00001") == {"x7": ("contaminated:gsm", "")}
    assert removed_ids(tmp_path, "web", "00000") == {}      # same source, other shard
    assert removed_ids(tmp_path, "forum", "00001") == {}    # another source holding an id "x7"
    from curation.core.record import Record
    from curation.steps.droplist import DropListed
    step = DropListed("decontaminate", removed_ids(tmp_path, "web", "00001"), source="web")
    kept = list(step.run(Record(f"x{i}", "web", "t") for i in range(100)))
    assert len(kept) == 99 and "x7" not in {r.id for r in kept}
    assert dict(step.stats.dropped) == {"contaminated:gsm": 1}


@pytest.mark.slow
def test_precision_and_recall_on_planted_contamination(tmp_path):
    """Benchmark items (the demo's GSM8K and TruthfulQA copies) planted into real demo documents.

    Thresholds, justified by the rule rather than tuned: a verbatim item, or its first 70% (of its
    normalised words), holds at least (0.7·L−12)/(L−12) ≥ 0.59 of the item's 13-grams for items of
    L ≥ 40 words, above the 0.5 rule whatever the seed, so
    recall must be 1.0 for both; untouched documents must never be flagged (precision 1.0 on this
    corpus, which holds no benchmark text); an item cut to its first 35% holds under 0.35 and must not be
    flagged either: the rule is a share of the item, not any shared n-gram."""
    import gzip
    import random

    from curation.corpus.decont.benchmarks import load_items
    from tests.conftest import REPO

    bench = REPO / "recipes" / "demo" / "benchmarks"
    items = load_items("gsm8k", bench / "gsm8k_test.jsonl.gz", ["question", "answer"], "idx") + \
        load_items("truthfulqa", bench / "truthfulqa.jsonl.gz", ["Question", "Best Answer", "Correct Answers"], None)
    docs = [json.loads(line)["text"] for p in sorted((REPO / "recipes" / "demo" / "corpus").glob("*/*.jsonl.gz"))
            for line in gzip.open(p, "rt", encoding="utf-8")][:300]
    rng = random.Random(3)
    s = Shingler(13)
    long_items = [it for it in items if len(s.words(it.text)) >= 40]

    def prefix(text: str, share: float) -> str:
        """The raw prefix holding `share` of the item's normalised words (what the rule counts):
        at least that share when cutting to 0.7, at most when cutting to 0.35."""
        raw, total = text.split(), len(s.words(text))
        sizes = [len(s.words(" ".join(raw[:k]))) for k in range(len(raw) + 1)]
        if share >= 0.5:
            return " ".join(raw[:next(k for k, n in enumerate(sizes) if n >= share * total)])
        return " ".join(raw[:max(k for k, n in enumerate(sizes) if n <= share * total)])

    planted = {"verbatim": [], "partial-70": [], "partial-35": []}
    corpus = list(docs)
    for kind, share in (("verbatim", 1.0), ("partial-70", 0.7), ("partial-35", 0.35)):
        for _ in range(25):
            host = rng.choice(docs).split(" ")
            at = rng.randrange(len(host) + 1)
            corpus.append(" ".join(host[:at] + [prefix(rng.choice(long_items).text, share)] + host[at:]))
            planted[kind].append(len(corpus) - 1)
    ngrams = build_index(items, 13, 4, tmp_path).column("ngrams").to_pylist()
    found = match([s(d) for d in corpus], tmp_path, 4)
    flagged = {i for i, f in enumerate(found) if f and max(c / ngrams[it] for it, c in f.items()) >= 0.5}
    missed = [i for i in planted["verbatim"] + planted["partial-70"] if i not in flagged]
    assert not missed, [(i, found[i]) for i in missed][:3]  # recall 1.0
    assert not flagged & set(range(len(docs)))                                          # precision 1.0
    assert not flagged & set(planted["partial-35"])


def test_on_an_output_url_the_resolution_fetches_text_only_of_flagged_shards(tmp_path):
    """`decont_resolve` counts every shard's documents but shows texts only of flagged samples: on an output
    URL it fetches a processed shard whole only when its flags (fetched first) hold a row, else its ids."""
    import fsspec
    import pyarrow as pa
    import pyarrow.parquet as pq

    from curation.core.layout import flags_path, processed_path
    from curation.core.outloc import Remote
    from curation.corpus.decont.match import FLAG_SCHEMA
    from curation.corpus.decont.phase import DecontPhase
    fs = fsspec.filesystem("memory")
    root, local = f"decont-{tmp_path.name}/run", tmp_path / "staging"
    fetcher = DecontPhase().partial_reads()["decont_resolve"]
    flag = {"source": "web", "shard": "0", "id": "d1", "benchmark": "b", "item": 0, "item_id": "i",
            "overlap": 9, "item_ngrams": 9, "ratio": 1.0}
    for shard, flags in (("0", [flag]), ("1", [])):
        path = processed_path(tmp_path / "src", "web", shard)
        path.parent.mkdir(parents=True, exist_ok=True)
        pq.write_table(pa.table({"id": ["d0", "d1"], "text": ["a " * 500, "b " * 500]}), path)
        fs.pipe_file(f"{root}/processed/web/{shard}.parquet", path.read_bytes())
        flags_path(local, "web", shard).parent.mkdir(parents=True, exist_ok=True)
        pq.write_table(pa.Table.from_pylist(flags, schema=FLAG_SCHEMA), flags_path(local, "web", shard))
    for shard in ("0", "1"):
        rel = f"processed/web/{shard}.parquet"
        fetcher(None, rel)(Remote(f"memory://{root}"), rel, local / rel)
    assert pq.read_table(processed_path(local, "web", "0")).column_names == ["id", "text"]   # flagged: whole
    assert pq.read_table(processed_path(local, "web", "1")).column_names == ["id"]           # its row count
    assert pq.ParquetFile(processed_path(local, "web", "1")).metadata.num_rows == 2
    assert fetcher(None, "work/decont/flags/web/0.parquet") is None
