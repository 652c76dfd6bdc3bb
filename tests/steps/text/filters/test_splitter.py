"""WordSplitter gives exactly the words, sentence spans and sentence counts of datatrove's spaCy
tokenizer: on adversarial strings, on every document and line of the benchmark corpora (an even sample by default,
every document with CURATE_WHOLE_CORPORA=1), and for every chunk it decides without spaCy."""
from __future__ import annotations

import pytest
from datatrove.utils.word_tokenizers import SpaCyTokenizer

from curation.steps.text.filters.splitter import WordSplitter
from tests.steps.text.texts import ADVERSARIAL, CORPORA, DOCUMENTS, corpus, corpus_sample

SPACY_CODE = {"eng": "en", "deu": "de", "spa": "es", "nld": "nl", "fra": "fr", "ara": "xx"}


def reference(language: str) -> SpaCyTokenizer:
    """A tokenizer of its own, so nothing the code under test touches is shared with it."""
    return SpaCyTokenizer(SPACY_CODE[language])


def sentence_count(ref: SpaCyTokenizer, text: str, spans: list | None = None) -> int:
    """len(datatrove.utils.text.split_into_sentences(text)), on `ref` (or on its `spans` of `text`)."""
    ends = [b for _, b in (ref.span_tokenize(text) if spans is None else spans)]
    return len(list(zip([0] + ends[:-1], ends[:-1] + [len(text)])))


def assert_same(splitter: WordSplitter, ref: SpaCyTokenizer, text: str) -> int:
    assert splitter.words(text) == ref.word_tokenize(text), text[:200]
    spans = ref.span_tokenize(text)
    assert splitter.sentence_spans(text) == spans, text[:200]
    lines = [line.strip() for line in text.splitlines()] + [text]
    # the reference runs spaCy once per distinct string: most documents are one line, which is the text
    # again (spaCy is nearly all of this test's time; the splitter is still asked every time)
    want = {text: sentence_count(ref, text, spans)}
    for line in lines:
        if line not in want:
            want[line] = sentence_count(ref, line)
        assert splitter.sentence_count(line) == want[line], line[:200]
    return len(lines)


@pytest.mark.slow
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
    # spaCy's output for "IS_ALPHA" depends on its vocabulary's history (kept the first time, then
    # failing, when datatrove retries without it): such texts go to datatrove's tokenizer whole
    before = splitter.texts_delegated
    splitter.words("IS_ALPHA and more"), splitter.sentence_spans("IS_ALPHA and more")
    splitter.sentence_count("so IS_ALPHA")
    assert splitter.texts_delegated == before + 3


def test_languages_without_a_chunk_wise_tokenizer_are_refused():
    # Thai (pythainlp) and Korean (kiwi) are not spaCy; Japanese splits on bytes, not whitespace;
    # Spanish and Russian have special cases with a space inside
    for language in ("tha", "kor", "jpn", "spa", "rus"):
        assert WordSplitter.for_language(language) is None


class _Gate:
    """A tokenizer pattern that matches nothing until opened."""

    def __init__(self, fn, nothing):
        self.fn, self.nothing, self.open = fn, nothing, False

    def __call__(self, string):
        return self.fn(string) if self.open else self.nothing


def pre_matcher_copy(tok):
    """spaCy's own tokenizer without the special-case matcher: `Tokenizer.add_special_case` gives a
    rule to the matcher only if the affix patterns match it then, so the copy is built with gated
    patterns and opened afterwards. Its output is `_tokenize_affixes(text, True)`."""
    import spacy.tokenizer
    gates = {name: _Gate(fn, iter(()) if name == "infix_finditer" else None) if fn is not None else None
             for name, fn in (("prefix_search", tok.prefix_search), ("suffix_search", tok.suffix_search),
                              ("infix_finditer", tok.infix_finditer), ("token_match", tok.token_match),
                              ("url_match", tok.url_match))}
    copy = spacy.tokenizer.Tokenizer(tok.vocab, rules=tok.rules, **gates)
    for gate in gates.values():
        if gate is not None:
            gate.open = True
    return copy


def assert_chunks_like_spacy(splitter: WordSplitter, ref: SpaCyTokenizer, chunks: set[str]) -> int:
    """The Python affix pass gives spaCy's tokens before its matcher for every chunk, and spaCy's
    final tokens for every chunk it keeps from spaCy (no pattern inside). Returns those kept."""
    rules, nlp = splitter.rules, ref.tokenizer
    before = pre_matcher_copy(nlp.tokenizer)
    kept = 0
    with nlp.memory_zone():
        for c in sorted(chunks):
            if "IS_ALPHA" in c:  # texts with it never reach the chunk memo: they go to datatrove whole
                continue
            pre = rules.affix_tokens(c)
            assert list(pre) == [t.text for t in before(c)], c
            if not rules.touched(pre):
                assert list(pre) == [t.text for t in nlp.tokenizer(c)], c
                kept += 1
    return kept


@pytest.mark.slow
@pytest.mark.shared_data
def test_chunks_decided_without_spacy_are_spacy_tokens():
    splitter, ref = WordSplitter.for_language("eng"), reference("eng")
    chunks = {c for t in DOCUMENTS for c in t.split()}
    for name, _ in CORPORA[:6]:
        chunks |= {c for t in corpus(name)[:300] for c in t.split()}
    assert assert_chunks_like_spacy(splitter, ref, chunks) > 0.95 * len(chunks)


@pytest.mark.shared_data
@pytest.mark.slow
@pytest.mark.parametrize("name,language", CORPORA)
def test_every_document_line_and_chunk_of_the_corpora(name, language):
    """Every line and chunk of an even ~1 MB sample of each corpus (CURATE_WHOLE_CORPORA=1: every document)."""
    if WordSplitter.for_language(language) is None:
        pytest.skip(f"{language}: special cases with spaces inside, the filters use datatrove's tokenizer")
    splitter, ref = WordSplitter(SpaCyTokenizer(SPACY_CODE[language])), reference(language)
    texts = [t for t in corpus_sample(name) if "IS_ALPHA" not in t]
    lines = sum(assert_same(splitter, ref, t) for t in texts)
    assert lines >= len(texts)
    # every chunk decided without spaCy is cut as spaCy cuts it
    assert_chunks_like_spacy(splitter, ref, {c for t in texts for c in t.split()})


def test_memo_starting_afresh_changes_nothing(monkeypatch):
    import curation.steps.text.filters.splitter as module
    monkeypatch.setattr(module, "_MEMO_LIMIT", 40)  # far fewer chunks than one document has
    splitter, ref = WordSplitter(SpaCyTokenizer("en")), reference("eng")
    for text in DOCUMENTS[:30] * 2:
        assert_same(splitter, ref, text)
    assert len(splitter._tokens) < 400
