"""One spaCy pass per document for all datatrove filters of a step chain.

datatrove's Gopher repetition, Gopher quality, C4 and FineWeb filters each ask the shared
per-language spaCy word tokenizer to split the same text again (words three times, sentence
spans once). Profiling the demo's filter chain showed spaCy tokenisation at ~85% of the run
time. `share_spacy_passes()` wraps the shared tokenizer instances so that the first request for a
text computes words, sentences and sentence spans in one pass and the others reuse it.
Results are the same lists datatrove computes (tests/steps/text/test_word_cache.py checks verdicts and
splits on real documents; tests/benchmarks/bench_text.py measures the gain).
"""
from __future__ import annotations

from datatrove.utils.word_tokenizers import (
    SpaCyTokenizer,
    load_word_tokenizer,
    strip_strings,
)


class _OnePass:
    """Replaces the three splitting methods of one SpaCyTokenizer instance; remembers the last text."""

    def __init__(self, tok: SpaCyTokenizer):
        self.tok = tok
        self.text: str | None = None
        self.words: list[str] = []
        self.sents: list[str] = []
        self.spans: list[tuple[int, int]] = []

    def _analyse(self, text: str) -> None:
        if text is self.text or text == self.text:
            return
        tok = self.tok
        words, sents, spans = [], [], []
        with tok.tokenizer.memory_zone():
            tok.tokenizer.max_length = len(text) + 10
            for chunk in tok._do_tokenize(text):
                start = spans[-1][1] if spans else 0
                words.extend(t.text for t in chunk)
                for sent in chunk.sents:
                    sents.append(sent.text)
                    spans.append((start + sent.start_char, start + sent.end_char))
        self.text, self.words, self.sents, self.spans = text, strip_strings(words), strip_strings(sents), spans

    def word_tokenize(self, text: str) -> list[str]:
        self._analyse(text)
        return list(self.words)

    def sent_tokenize(self, text: str) -> list[str]:
        self._analyse(text)
        return list(self.sents)

    def span_tokenize(self, text: str) -> list[tuple[int, int]]:
        self._analyse(text)
        return list(self.spans)


def share_spacy_passes(language: str) -> None:
    """Make datatrove's shared tokenizer for `language` split each text once (idempotent)."""
    tok = load_word_tokenizer(language)
    if not isinstance(tok, SpaCyTokenizer) or getattr(tok, "_curate_one_pass", None):
        return
    one = _OnePass(tok)
    tok.word_tokenize, tok.sent_tokenize, tok.span_tokenize = one.word_tokenize, one.sent_tokenize, one.span_tokenize
    tok._curate_one_pass = one
