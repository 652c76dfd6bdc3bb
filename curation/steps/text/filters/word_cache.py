"""One word split per document, shared by all quality filter steps of a chain.

datatrove's Gopher repetition, Gopher quality and FineWeb filters each split the same text into
words, and C4 splits every line into sentences. `WordCache.for_language(language)` returns the one
cache of a process for that language; `view(text)` gives a `TextWords` for a text, computed once
(the cache keeps the last few texts, so the steps of a chain that see one record after another
share it), with the per-word facts the filters need derived once per distinct word.

Words and sentences come from `WordSplitter` (spaCy-identical, memoised per chunk) where the
language's tokenizer allows it, else from datatrove's own tokenizer for the language.
"""
from __future__ import annotations

from functools import cache

import numpy as np

from curation.core.extras import import_spacy
from curation.steps.text.filters.repetition import char_hash
from curation.steps.text.filters.splitter import WordSplitter

_KEEP = 3  # texts remembered: a chain sees one record at a time, C4 may hand on an edited text
_WORD_LIMIT = 1 << 18  # distinct words remembered before starting afresh (~300 bytes each)
_COLUMNS = (("length", np.int64), ("non_symbol", bool), ("alpha", bool), ("hash", np.int64), ("power", np.int64))


class _WordTable:
    """Distinct words seen, numbered, with the per-word facts the filters use as numpy columns:
    length, non_symbol (a character outside datatrove's PUNCTUATION_SET), alpha (a character
    `str.isalpha`), hash and power (`repetition.char_hash`). Columns grow by doubling."""

    def __init__(self, generation: int = 0):
        self.generation = generation  # bumped when the table starts afresh: ids of older views are void
        self.ids: dict[str, int] = {}
        for name, dtype in _COLUMNS:
            setattr(self, name, np.zeros(1024, dtype))
        self.spaced: set[int] = set()  # words with a " " inside (only from non-spaCy tokenizers)

    def lookup(self, words: list[str]) -> np.ndarray:
        try:   # every word already numbered (most texts once a worker is warm): no set of the words to build
            return np.fromiter(map(self.ids.__getitem__, words), dtype=np.int64, count=len(words))
        except KeyError:
            pass
        new = set(words).difference(self.ids)
        if new:
            if len(self.ids) + len(new) > _WORD_LIMIT:
                self.__init__(self.generation + 1)
                new = set(words)
            self._add(sorted(new))
        return np.fromiter(map(self.ids.__getitem__, words), dtype=np.int64, count=len(words))

    def _add(self, words: list[str]) -> None:
        from datatrove.utils.text import PUNCTUATION_SET
        base, n = len(self.ids), len(words)
        if base + n > self.length.size:
            size = max(2 * self.length.size, base + n)
            for name, _ in _COLUMNS:
                column = getattr(self, name)
                grown = np.zeros(size, column.dtype)
                grown[:base] = column[:base]
                setattr(self, name, grown)
        self.ids.update(zip(words, range(base, base + n)))
        hashes = [char_hash(w) for w in words]
        self.length[base:base + n] = [len(w) for w in words]
        self.non_symbol[base:base + n] = [any(ch not in PUNCTUATION_SET for ch in w) for w in words]
        self.alpha[base:base + n] = [any(c.isalpha() for c in w) for w in words]
        self.hash[base:base + n] = [h for h, _ in hashes]
        self.power[base:base + n] = [p for _, p in hashes]
        self.spaced.update(base + i for i, w in enumerate(words) if " " in w)


class TextWords:
    """The words of one text; per position the word's number in the process's word table."""

    def __init__(self, words: list[str], table: _WordTable):
        self.words = words
        self._table = table
        self._ids: np.ndarray | None = None
        self._generation = -1

    @property
    def ids(self) -> np.ndarray:
        if self._ids is None or self._generation != self._table.generation:
            self._ids = self._table.lookup(self.words)
            self._generation = self._table.generation
        return self._ids

    def column(self, name: str) -> np.ndarray:
        """A per-word fact (length, non_symbol, alpha, hash, power) at every position."""
        ids = self.ids  # first: looking words up may extend the columns
        return getattr(self._table, name)[ids]

    @property
    def has_spaced_word(self) -> bool:
        spaced = self._table.spaced
        return bool(spaced) and not spaced.isdisjoint(self.ids.tolist())


class WordCache:
    """words(text), sentence counts and splits as datatrove's filters compute them for `language`."""

    def __init__(self, language: str):
        from datatrove.utils.word_tokenizers import load_word_tokenizer
        import_spacy()
        self.language = language
        self.splitter = WordSplitter.for_language(language)
        self._tokenizer = self.splitter.datatrove if self.splitter else load_word_tokenizer(language)
        self._views: dict[str, TextWords] = {}
        self._table = _WordTable()

    @classmethod
    def for_language(cls, language: str) -> WordCache:
        return _for_language(language)

    def view(self, text: str) -> TextWords:
        view = self._views.get(text)
        if view is None:
            if len(self._views) >= _KEEP:
                del self._views[next(iter(self._views))]
            words = self.splitter.words(text) if self.splitter else self._tokenizer.word_tokenize(text)
            view = self._views[text] = TextWords(words, self._table)
        return view

    def sentence_count(self, text: str) -> int:
        """== len(split_into_sentences(text, language))."""
        if self.splitter:
            return self.splitter.sentence_count(text)
        return len(self.sentences(text))

    def sentences(self, text: str) -> list[str]:
        """== split_into_sentences(text, language): the text cut after each sentence but the last."""
        spans = self.splitter.sentence_spans(text) if self.splitter else self._tokenizer.span_tokenize(text)
        ends = [b for _, b in spans]
        return [text[a:b] for a, b in zip([0] + ends[:-1], ends[:-1] + [len(text)])]


@cache
def _for_language(language: str) -> WordCache:
    return WordCache(language)
