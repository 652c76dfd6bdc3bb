"""WordSplitter gives exactly the words, sentence spans and sentence counts of datatrove's spaCy
tokenizer: on adversarial strings, on every document and line of the benchmark corpora, and for
every chunk it decides without spaCy."""
from __future__ import annotations

import pytest
from datatrove.utils.word_tokenizers import SpaCyTokenizer

from curation.steps.text.splitter import WordSplitter
from tests.steps.text.texts import ADVERSARIAL, CORPORA, DOCUMENTS, corpus

SPACY_CODE = {"eng": "en", "deu": "de", "spa": "es", "nld": "nl", "fra": "fr", "ara": "xx"}


def reference(language: str) -> SpaCyTokenizer:
    """A tokenizer of its own, so nothing the code under test touches is shared with it; it has
    seen "IS_ALPHA" once, like the splitter's (spaCy handles that string differently afterwards)."""
    ref = SpaCyTokenizer(SPACY_CODE[language])
    ref.word_tokenize("IS_ALPHA")
    splitter = WordSplitter.for_language(language)
    if splitter is not None:
        splitter.datatrove.word_tokenize("IS_ALPHA")
    return ref


def sentence_count(ref: SpaCyTokenizer, text: str) -> int:
    """len(datatrove.utils.text.split_into_sentences(text)), on `ref`."""
    ends = [b for _, b in ref.span_tokenize(text)]
    return len(list(zip([0] + ends[:-1], ends[:-1] + [len(text)])))


def assert_same(splitter: WordSplitter, ref: SpaCyTokenizer, text: str) -> int:
    assert splitter.words(text) == ref.word_tokenize(text), text[:200]
    assert splitter.sentence_spans(text) == ref.span_tokenize(text), text[:200]
    lines = [line.strip() for line in text.splitlines()] + [text]
    for line in lines:
        assert splitter.sentence_count(line) == sentence_count(ref, line), line[:200]
    return len(lines)


@pytest.mark.parametrize("language", ["eng", "deu", "fra", "nld", "ara"])
def test_adversarial_strings(language):
    splitter, ref = WordSplitter.for_language(language), reference(language)
    assert splitter is not None
    for text in DOCUMENTS + [a + " " + b for a in ADVERSARIAL for b in ADVERSARIAL[::5]]:
        assert_same(splitter, ref, text)


def test_chunks_tokenized_in_context_like_spacy():
    """A special case's pattern spanning two chunks (''' '' ''') shadows a match inside one chunk;
    such texts go to datatrove's tokenizer, so the words still agree."""
    splitter, ref = WordSplitter.for_language("eng"), reference("eng")
    for text in ["to ''1980''", "x'' ''1980''", "a.'' ''1980'' b", "'' ''1980''", "dpa) - : x", "(: (:", "Jan . x"]:
        assert_same(splitter, ref, text)
    before = splitter.texts_delegated
    assert splitter.words("x'' ''1980''") == ref.word_tokenize("x'' ''1980''") == ["x", "''", "'", "'", "1980", "''"]
    assert splitter.texts_delegated == before + 1
    # spaCy keeps "IS_ALPHA" the first time a vocabulary sees it and fails on it afterwards, when
    # datatrove retries without it: such texts are datatrove's (history-dependent) business
    text = "IS_ALPHA and more"
    before = splitter.texts_delegated
    assert splitter.words(text) == ref.word_tokenize(text) == ["and", "more"]
    assert splitter.sentence_spans(text) == ref.span_tokenize(text)
    assert splitter.texts_delegated == before + 2


def test_languages_without_a_chunk_wise_tokenizer_are_refused():
    # Thai (pythainlp) and Korean (kiwi) are not spaCy; Japanese splits on bytes, not whitespace;
    # Spanish and Russian have special cases with a space inside
    for language in ("tha", "kor", "jpn", "spa", "rus"):
        assert WordSplitter.for_language(language) is None


def test_fast_path_chunks_are_single_spacy_tokens():
    """Every chunk decided without spaCy is one token under spaCy (adversarial strings and corpora)."""
    splitter, ref = WordSplitter.for_language("eng"), reference("eng")
    chunks = {c for t in DOCUMENTS for c in t.split()}
    for name, language in CORPORA[:6]:
        chunks |= {c for t in corpus(name)[:300] for c in t.split()}
    # (texts with "IS_ALPHA" never reach the chunk memo: they go to datatrove whole)
    fast = [c for c in sorted(chunks) if "IS_ALPHA" not in c and splitter.rules.one_token(c)]
    assert len(fast) > len(chunks) / 3
    with ref.tokenizer.memory_zone():
        for c in fast:
            assert [t.text for t in ref.tokenizer.tokenizer(c)] == [c], c


@pytest.mark.slow
@pytest.mark.parametrize("name,language", CORPORA)
def test_every_document_line_and_chunk_of_the_corpora(name, language):
    if WordSplitter.for_language(language) is None:
        pytest.skip(f"{language}: special cases with spaces inside, the filters use datatrove's tokenizer")
    splitter, ref = WordSplitter(SpaCyTokenizer(SPACY_CODE[language])), reference(language)
    splitter.datatrove.word_tokenize("IS_ALPHA")
    texts = corpus(name)
    lines = sum(assert_same(splitter, ref, t) for t in texts)
    assert lines >= len(texts)
    # the fast path: every chunk it routed is a single spaCy token
    fast = [c for c in sorted({c for t in texts for c in t.split()}) if "IS_ALPHA" not in c and splitter.rules.one_token(c)]
    with ref.tokenizer.memory_zone():
        wrong = [c for c in fast if [t.text for t in ref.tokenizer.tokenizer(c)] != [c]]
    assert not wrong
