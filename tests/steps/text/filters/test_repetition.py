"""The vectorised n-gram statistics equal datatrove's string-based ones, number for number."""
from __future__ import annotations

import random

import numpy as np
import pytest
from datatrove.pipeline.filters.gopher_repetition_filter import find_all_duplicate, find_top_duplicate, get_n_grams

from curation.steps.text.filters.repetition import DuplicateScan, char_hash, top_ngram_chars
from curation.steps.text.filters.splitter import WordSplitter
from tests.steps.text.texts import BENCH, DOCUMENTS, corpus


def ours(words: list[str], ns=range(1, 12)) -> tuple[list, list]:
    index: dict[str, int] = {}
    ids = np.asarray([index.setdefault(w, len(index)) for w in words], dtype=np.int64)
    lengths = np.asarray([len(w) for w in words], dtype=np.int64)
    hashes = [char_hash(w) for w in words]
    scan = DuplicateScan(words, np.asarray([h for h, _ in hashes], np.int64),
                         np.asarray([p for _, p in hashes], np.int64), lengths)
    tops = [top_ngram_chars(ids, lengths, n) for n in ns]
    return tops, [scan.chars(n) for n in ns]


def theirs(words: list[str], ns=range(1, 12)) -> tuple[list, list]:
    tops = [find_top_duplicate(get_n_grams(words, n)) if get_n_grams(words, n) else None for n in ns]
    return tops, [find_all_duplicate(words, n) for n in ns]


def test_concatenations_that_collide_without_separator():
    # "ab"+"c" == "a"+"bc": datatrove's duplicated n-grams are joined without a separator
    words = ["ab", "c", "x", "a", "bc", "x", "ab", "c", "x", "abc", "x", "a", "b", "c", "x"]
    assert ours(words) == theirs(words)
    assert ours(words)[1][1] > 0 and ours(words)[1][2] > 0


@pytest.mark.slow
def test_random_word_sequences():
    rng = random.Random(0)
    for _trial in range(300):
        vocab = ["a", "b", "ab", "ba", "aa", "é", "e\u0301", "🙂", "\ud800x"][: rng.randint(1, 9)]
        words = [rng.choice(vocab) for _ in range(rng.randint(0, 60))]
        assert ours(words) == theirs(words), words
    # also in the unbounded-key branch (many distinct words, long n)
    words = [str(rng.randrange(5000)) for _ in range(3000)] * 2
    assert ours(words, ns=(2, 4, 7, 10)) == theirs(words, ns=(2, 4, 7, 10))


def test_ties_go_to_the_first_seen_ngram():
    words = ["xx", "y", "z", "xx", "y", "z", "a", "bb", "a", "bb"]
    assert top_ngram_chars(np.asarray([0, 1, 2, 0, 1, 2, 3, 4, 3, 4]), np.asarray([len(w) for w in words]), 2) \
        == find_top_duplicate(get_n_grams(words, 2))


@pytest.mark.slow
@pytest.mark.shared_data
def test_adversarial_and_benchmark_documents():
    splitter = WordSplitter.for_language("eng")
    texts = DOCUMENTS + [t for name in BENCH for t in corpus(name)[:150]]
    for text in texts:
        words = splitter.words(text)
        assert ours(words) == theirs(words), text[:100]
