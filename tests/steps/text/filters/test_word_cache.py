"""WordCache: one split per text shared by the filter steps, the same words as datatrove's tokenizer."""
import gzip
import itertools
import json

import pytest
from datatrove.utils.text import PUNCTUATION_SET, split_into_sentences
from datatrove.utils.word_tokenizers import SpaCyTokenizer

from curation.steps.text.filters.repetition import char_hash
from curation.steps.text.filters.word_cache import WordCache
from tests.conftest import REPO


def _demo_texts(n=40):
    texts = []
    for path in sorted((REPO / "recipes" / "demo" / "corpus").glob("*/*.jsonl.gz")):
        texts += [json.loads(line)["text"] for line in gzip.open(path, "rt", encoding="utf-8")][:n // 4]
    return texts


def test_a_text_is_split_once_and_shared():
    cache = WordCache.for_language("eng")
    assert WordCache.for_language("eng") is cache
    text = "One text, seen by three filters in a row."
    assert cache.view(text) is cache.view(text)
    for other in ("a", "b", "c"):
        cache.view(other)
    assert cache.view("c") is cache.view("c") and len(cache._views) <= 3


@pytest.mark.slow
def test_words_and_per_word_facts():
    cache, ref = WordCache.for_language("deu"), SpaCyTokenizer("de")
    for text in _demo_texts():
        view = cache.view(text)
        assert view.words == ref.word_tokenize(text)
        assert view.column("length").tolist() == [len(w) for w in view.words]
        assert view.column("non_symbol").tolist() == [any(c not in PUNCTUATION_SET for c in w) for w in view.words]
        assert view.column("alpha").tolist() == [any(c.isalpha() for c in w) for w in view.words]
        assert view.column("hash").tolist() == [char_hash(w)[0] for w in view.words]
        assert cache.sentences(text) == split_into_sentences(text, "deu")


def test_languages_the_splitter_refuses_use_datatrove_tokenizer():
    cache, ref = WordCache.for_language("spa"), SpaCyTokenizer("es")
    assert cache.splitter is None
    text = "El Sr. García llegó a las 10 a. m. del 3 de ene. ¿Por qué? ¡Porque sí! Fin."
    assert cache.view(text).words == ref.word_tokenize(text)
    assert cache.sentence_count(text) == len(split_into_sentences(text, "spa"))


@pytest.mark.slow
def test_word_table_starting_afresh_keeps_views_right(monkeypatch):
    import curation.steps.text.filters.word_cache as module
    monkeypatch.setattr(module, "_WORD_LIMIT", 30)
    cache, ref = WordCache("eng"), SpaCyTokenizer("en")
    texts = _demo_texts(12)
    for a, b in itertools.pairwise(texts):
        first = cache.view(a)
        _ = first.ids
        _ = cache.view(b).ids  # more distinct words than the table holds: it starts afresh
        again = cache.view(a)
        assert again is first  # the cached view, whose ids predate the restart
        assert again.column("length").tolist() == [len(w) for w in ref.word_tokenize(a)]
        assert again.column("hash").tolist() == [char_hash(w)[0] for w in again.words]
    assert cache._table.generation > 5
