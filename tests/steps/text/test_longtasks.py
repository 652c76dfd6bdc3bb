"""Synthetic long-context tasks (`curation.steps.text.longtasks`): every answer is checked against an
independent computation over the rendered example (a character-by-character word count, section
positions found in the original text, listings parsed back from the user turn), and the loss mask of
the tokenized example leaves the injected document out exactly where the paper says (DocOrder, needles)."""
from __future__ import annotations

import gzip
import json
import re
from collections import Counter
from pathlib import Path

import pytest

from curation.errors import RecordError
from curation.steps.text import longtasks as lt
from tests.chats import vocab, vocab_dict

ROOT = Path(__file__).resolve().parents[3]


def _documents(n: int = 24) -> list[tuple[str, str]]:
    out = []
    for path in sorted((ROOT / "recipes/demo/corpus/web_en").glob("*.jsonl.gz")):
        with gzip.open(path, "rt", encoding="utf-8") as f:
            for line in f:
                row = json.loads(line)
                if len(row["text"].split()) >= 200:
                    out.append((str(row["id"]), row["text"]))
    assert len(out) >= n, "the demo corpus has too few long English pages for these tests"
    return out[:n]


def _count_words(text: str) -> Counter:
    """Independent of the generator's regex: letters gathered one character at a time."""
    counts, cur = Counter(), []
    for ch in text + " ":
        if ch.isalpha():
            cur.append(ch.lower())
        elif cur:
            counts["".join(cur)] += 1
            cur = []
    return counts


def _turns(task):
    users = [m["content"] for m in task.messages if m["role"] == "user"]
    answers = [m["content"] for m in task.messages if m["role"] == "assistant"]
    assert len(users) == len(answers)
    return users, answers


def _check(task, text):
    users, answers = _turns(task)
    if task.kind == "cwe":
        counts = _count_words(text)
        assert task.context == text
        assert len(users) == lt.QUESTIONS[task.bucket]["cwe"]
        for q, a in zip(users, answers):
            quoted = re.findall(r"[\"'«]([^\W\d_]+)[\"'»]|word:? ([^\W\d_]+)\b|word ([^\W\d_]+)\?", q, re.I)
            word = next(w for grp in quoted for w in grp if w)
            assert [int(x) for x in re.findall(r"\d+", a)] == [counts[word.lower()]], (q, a)
    elif task.kind == "docorder":
        (q,), (a,) = users, answers
        parts = re.split(r"(?:^|\n\n)\[([A-Z])\]\n", q)[1:]
        labels, bodies = parts[0::2], parts[1::2]
        assert len(labels) == lt.QUESTIONS[task.bucket]["docorder"]
        flat = " ".join(text.split())
        pos = {lab: flat.find(" ".join(body.split())) for lab, body in zip(labels, bodies)}
        assert all(p >= 0 for p in pos.values())
        expected = sorted(labels, key=lambda lab: pos[lab])
        assert re.findall(r"\b[A-Z]\b", a) == expected, (a, expected)
        assert sorted(" ".join(bodies).split()) == sorted(text.split())   # every word shown once
    else:
        listings = dict(re.findall(r"\[Registry listing\] ([A-Za-z]+ [A-Za-z]+): access code (\d{6})\.", users[0]))
        assert len(users) == lt.QUESTIONS[task.bucket]["needles"] and len(listings) > len(users)
        for q, a in zip(users, answers):
            name = next(n for n in listings if n in q.split("\n\n")[-1])
            assert re.findall(r"\d{6}", a) == [listings[name]]
        without = re.sub(r"\[Registry listing\][^\n]*\n\n|\n\n\[Registry listing\][^\n]*", "", users[0])
        assert " ".join(text.split()) in " ".join(without.split()) or text.split()[:50] == without.split()[:50]


@pytest.mark.parametrize("kind", lt.TASKS)
def test_answers_match_an_independent_computation(kind):
    docs = _documents()
    formats, buckets = set(), set()
    for seed in range(3):
        for doc_id, text in docs:
            task = lt.make_task(text, doc_id, seed=seed, weights={kind: 1}, hard_below_words=500)
            assert task.kind == kind
            _check(task, text)
            formats.add(re.sub(r"[^a-z ]", "", _turns(task)[0][-1].split("\n\n")[0][:20].lower()))
            buckets.add(task.bucket)
    assert buckets == {"easy", "hard"}
    assert len(formats) >= 5   # the formats vary from document to document


def test_same_seed_same_task_other_seed_other_draws():
    doc_id, text = _documents(1)[0]
    w = {"cwe": 1, "docorder": 1, "needles": 1}
    a = lt.make_task(text, doc_id, seed=7, weights=w, hard_below_words=500)
    assert a == lt.make_task(text, doc_id, seed=7, weights=w, hard_below_words=500)
    others = [lt.make_task(text, doc_id, seed=s, weights=w, hard_below_words=500) for s in range(8)]
    assert len({(t.kind, json.dumps(t.messages)) for t in others}) > 1


def test_a_document_too_short_for_its_task_is_refused_with_the_reason():
    with pytest.raises(RecordError) as err:
        lt.make_task("one two three", "x", seed=0, weights={"docorder": 1}, hard_below_words=500)
    assert err.value.reason == "too_short_for_task"


def test_tokenized_examples_mask_the_document_for_docorder_and_needles_only():
    """One training example per document through the real tokenize step; targets from the chat markers
    (`curation.train.chat_mask`), as the trainer derives them."""
    from curation.core.record import QuarantineSink, Record
    from curation.steps.text.tokenize import TextTokenizer
    from curation.train.chat_mask import ConversationMask
    v = vocab()
    step = TextTokenizer(v, tasks={"weights": {"cwe": 1, "docorder": 1, "needles": 1}, "hard_below_words": 500,
                                   "seed": 0}, source="t", sink=QuarantineSink())
    docs = _documents(12)
    out = step.handle([Record(i, "t", t) for i, t in docs])
    cm = ConversationMask(vocab_dict())
    seen = set()
    for rec, (doc_id, text) in zip(out, docs):
        assert isinstance(rec, Record)
        (tokens,) = rec.shards[""]
        assert tokens[-1] == v.eod_id and int((tokens == v.eod_id).sum()) == 1   # one example
        mask, _ = cm.row(tokens)
        doc_ids = v.tokenizer.encode(text, add_special_tokens=False).ids
        kind = rec.meta["task"]["kind"]
        seen.add(kind)
        trained = tokens[mask]
        if kind == "cwe":   # the document precedes the turns and is trained; the questions are not
            assert list(tokens[:len(doc_ids)]) == doc_ids and mask[:len(doc_ids)].all()
        else:               # the document is in the user turn: no target
            assert mask.sum() < 0.1 * len(tokens)
        answers = [m for m in lt.make_task(text, doc_id, seed=0, weights={"cwe": 1, "docorder": 1, "needles": 1},
                                           hard_below_words=500).messages if m["role"] == "assistant"]
        answer_ids = [i for a in answers for i in v.tokenizer.encode(a["content"], add_special_tokens=False).ids]
        assert len(trained) - (len(doc_ids) if kind == "cwe" else 0) == len(answer_ids) + len(answers)  # + end_of_turn
    assert seen == set(lt.TASKS)
