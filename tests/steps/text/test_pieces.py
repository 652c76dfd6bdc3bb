"""Long texts are encoded in pieces with the same ids as encoding them whole (`curation.steps.text.pieces`),
and the text tokenizer keeps only ids: its memory is bounded by a few times the record, not ~425 bytes
per token (issue 22.7).

The equality tests cut at small piece sizes, so the corpora give thousands of cuts: on the benchmark
corpora (../shared/data/web_text, skipped when absent), on the demo corpus, and on adversarial
boundaries (a piece boundary inside a word, multi-byte and combining characters, whitespace runs
longer than a piece, added tokens in the text, one pre-token longer than the text's pieces).
"""
from __future__ import annotations

import functools
import gzip
import json
import subprocess
import sys

import numpy as np
import pytest
from tokenizers import Tokenizer

from curation.steps.text.pieces import PieceEncoder
from tests.conftest import REPO
from tests.steps.text.texts import ADVERSARIAL, BENCH, corpus

TOKENIZER = Tokenizer.from_file(str(REPO / "tokenizers" / "curate-demo-bpe.json"))


@functools.lru_cache(maxsize=64)   # a text is checked at many piece sizes: encode it whole once
def whole(text: str) -> np.ndarray:
    return np.asarray(TOKENIZER.encode(text, add_special_tokens=False).ids, dtype=np.int32)


def check(texts: list[str], piece: int, budget: int | None = None) -> int:
    """Asserts piece-wise ids == whole ids for every text; returns the number of cuts made."""
    enc = PieceEncoder(TOKENIZER, piece_chars=piece, budget_chars=budget or 4 * piece)
    assert enc.splittable
    made = []   # the cuts `ids` makes, counted as it makes them (cutting again would double the test's time)
    cut = enc.cuts
    enc.cuts = lambda text: made.append(cut(text)) or made[-1]   # type: ignore[method-assign]
    got = enc.ids(texts)
    enc.cuts = cut   # type: ignore[method-assign]
    cuts = sum(map(len, made))
    for text, ids in zip(texts, got):
        want = whole(text)
        assert ids.dtype == np.int32
        if not np.array_equal(ids, want):
            first = next(i for i, (a, b) in enumerate(zip(ids.tolist() + [-1], want.tolist() + [-1])) if a != b)
            pytest.fail(f"piece {piece}: ids differ at token {first} of a {len(text)}-char text "
                        f"(cuts {enc.cuts(text)[:8]}...)")
    return cuts


def _demo_texts() -> list[str]:
    texts = []
    for path in sorted((REPO / "recipes" / "demo" / "corpus").glob("*/*.jsonl.gz")):
        texts += [json.loads(line)["text"] for line in gzip.open(path, "rt", encoding="utf-8")]
    return texts


def _joined(texts: list[str], size: int) -> list[str]:
    """The texts joined (with their own whitespace between) into long texts of about `size` chars."""
    out, cur, n = [], [], 0
    for t in texts:
        cur.append(t)
        n += len(t)
        if n >= size:
            out.append("\n\n".join(cur))
            cur, n = [], 0
    if cur:
        out.append("\n\n".join(cur))
    return out


@pytest.mark.slow
def test_demo_corpus_piecewise_equals_whole():
    long = _joined(_demo_texts(), 200_000)
    chars = sum(map(len, long))
    assert check(long, 1000) > chars // 2000
    assert check(long, 97) > chars // 194


@pytest.mark.slow
@pytest.mark.parametrize("name", BENCH)
def test_benchmark_corpora_piecewise_equals_whole(name):
    long = _joined(corpus(name), 300_000)[:3]   # up to about 900 kB of each corpus
    chars = sum(map(len, long))
    assert check(long, 4096) > chars // 8192
    assert check(long, 211) > chars // 422


ADVERSE = [
    # a piece boundary inside a word: every piece size from 3 to 40 over words of every length
    " ".join("x" * k for k in range(1, 60)),
    "supercalifragilisticexpialidocious antidisestablishmentarianism " * 20,
    # multi-byte characters: CJK without spaces, emoji with ZWJ, decomposed and precomposed accents
    "東京は日本の首都です。北京是中国的首都。서울은 한국의 수도입니다。" * 30,
    "👨‍👩‍👧‍👦🏳️‍🌈🇩🇪 " * 40 + "cafe\u0301 e\u0301\u0301\u0301 Zoe\u0308 " * 40,
    "e\u0301" * 300,                         # every starter followed by a combining mark (NFC composes)
    "\u1100\u1161\u11a8 " * 100,             # Hangul jamo L V T: NFC composes three characters into one
    # whitespace runs: longer than a piece, mixed kinds, at the end
    "word" + " " * 500 + "next" + "\n" * 300 + "x\t\t\t" * 50 + " \u00a0 \u3000 " * 80 + "   ",
    ("a  b   c    d" + " " * 37) * 40,
    # added tokens in the text: a cut must not split `<|endoftext|>`
    "before<|endoftext|>after <|pad|> " * 60 + "<|endoftext|>" * 50,
    # one pre-token longer than a piece: the window grows past it
    "z" * 5000 + " tail words here",
    " " * 3000 + "x",
    # contractions and the regex's short alternatives near cuts
    "don't can't it's we're they've I'll he'd 's 't 're " * 60,
    "1234567890 3.14159 ---- !!!! ???? " * 50,
    *ADVERSARIAL,
]


@pytest.mark.slow
def test_adversarial_boundaries_piecewise_equals_whole():
    texts = ADVERSE + ["\n".join(ADVERSARIAL) * 3]
    cuts = sum(check(texts, piece, budget=piece) for piece in range(3, 41))
    assert cuts > 10_000
    check(texts, 500)


def test_a_short_text_and_empty_texts_are_one_piece():
    enc = PieceEncoder(TOKENIZER, piece_chars=64)
    assert enc.cuts("short text") == []
    got = enc.ids(["", "short text", ""], end=0)
    assert got[0].size == 0 and got[2].size == 0
    assert got[1].tolist() == whole("short text").tolist() + [0]


_CHILD = r"""
import json, sys
from curation.core.record import QuarantineSink, Record
from curation.core.vocab import Vocabulary
from curation.steps.text.tokenize import TextTokenizer
size = int(sys.argv[1])
words = ("The river town keeps a small library where volunteers sort donated books every week. "
         "Visitors ask about the old mill, and the staff answer with stories. ")
text = (words * (size // len(words) + 1))[:size] if size else "one small record"
step = TextTokenizer(Vocabulary.load(sys.argv[2]), source="s", sink=QuarantineSink())
from tests.peak import peak, reset
base = reset()
out = list(step.run([Record(id="r", source="s", text=text)]))
del text
tokens = len(out[0].shards[""][0])
print(json.dumps({"tokens": tokens, "growth": peak() - base}))
"""


@pytest.mark.slow   # encodes a 20 MB record (about 15 s on 2 cores)
def test_tokenizing_a_large_record_costs_a_few_times_its_size():
    size = 20 * 2**20

    def run(n):
        out = subprocess.run([sys.executable, "-c", _CHILD, str(n), str(REPO / "tokenizers" / "curate-demo-v1.yaml")],
                             cwd=REPO, capture_output=True, text=True, check=True)
        return json.loads(out.stdout.strip().splitlines()[-1])

    small, big = run(0), run(size)
    assert big["tokens"] > size // 8
    # whole Encodings would take ~425 bytes per token (about 2.5 GB here). What it costs instead: the int32 ids
    # of the pieces (1.1 bytes per character of this text), their one concatenated copy with the EOD, and one
    # encoding group's transient Encodings (`BUDGET_CHARS`, about 30 MB whatever the record's size): measured
    # 67-71 MiB for 20 MiB, 3.4 times the record. (Until 2026-12-08 this test read `ru_maxrss`, which a child
    # inherits from the pytest worker that starts it: inside the suite it measured nothing, and its bound of
    # twice the record was never met.)
    growth = big["growth"] - small["growth"]
    assert growth < 4 * size, f"tokenizing a {size >> 20} MiB record grew the process by {growth >> 20} MiB"
