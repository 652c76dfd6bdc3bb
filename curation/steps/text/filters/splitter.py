"""spaCy-identical word and sentence splits for datatrove's quality filters, memoised per chunk.

datatrove's Gopher, C4 and FineWeb filters split text with a blank spaCy pipeline (tokenizer +
sentencizer) inside a memory zone, so every call rebuilds every lexeme. `WordSplitter` gives the
same token texts and sentence boundaries at a fraction of the cost, from the way spaCy tokenizes
(see `curation.steps.text.filters.spacy_rules`):

- each whitespace-delimited chunk is tokenized on its own, so its tokens are memoised and only
  chunks not seen before reach spaCy, in one call per text; chunks the rules provably leave whole
  skip spaCy altogether (the fast path);
- a special-case match across chunks is never applied but can shadow a match inside a chunk, so
  each chunk also remembers its tokens as the matcher sees them, which patterns its tail could
  begin and whether a pattern matches inside it; a text where a pattern may run from a chunk into
  the next ones (single spaces between) and touch a chunk with a match of its own is handed to
  datatrove's tokenizer, as are texts containing "IS_ALPHA" (spaCy fails on it after the first
  time a vocabulary sees it, and datatrove then retries without it);
- the sentencizer starts a sentence at the first token and at every token that is neither
  punctuation (`is_punct`) nor a sentence-final character and follows a final character; each chunk
  keeps what it does to that state, so counting a line's sentences costs one step per chunk.

Tokenizers that cross whitespace (Chinese, Japanese, Vietnamese, Thai, ...) or special cases with
whitespace inside are not handled: `WordSplitter.for_language` returns None and callers keep
datatrove's tokenizer. tests/steps/text/filters/test_splitter.py checks every document, line and chunk of
the benchmark corpora and a set of adversarial strings against spaCy.
"""
from __future__ import annotations

import re
from functools import cache
from itertools import chain

from curation.core.extras import import_spacy
from curation.steps.text.filters.spacy_rules import ChunkRules

_RUNS = re.compile(r"(\s+)")  # re's \s is str.isspace, the test spaCy's tokenizer splits on
_MEMO_LIMIT = 1 << 18  # distinct chunks remembered before the memo is cleared (~300 bytes each)
_BREAKS_SPACY = "IS_ALPHA"


class WordSplitter:
    """Token texts and sentence boundaries as datatrove's `SpaCyTokenizer(language)` computes them.

    Per distinct chunk it remembers: `_tokens` (the token texts); `_effect` (what the chunk does
    to the sentencizer: `first` is "P" when its first token that is not plain punctuation is a
    sentence-final character, "o" when it is anything else (it opens a sentence if a final
    character is pending), "" when all tokens are plain punctuation; `inner`: the sentences it
    opens after that token; `exit`: a final character pending at its end); and, for the
    cross-chunk matcher check, `_tails` (chunk -> first tokens of the pattern continuations its
    tail begins; `_needs` the reverse), `_opens` (chunk -> its first token, when a continuation
    may start with it),
    `_pre` (its tokens as the matcher sees them, where they differ from the final ones) and
    `_matched` (the chunks inside which a pattern occurs).
    """

    def __init__(self, datatrove_tokenizer):
        nlp = datatrove_tokenizer.tokenizer
        self.datatrove, self._nlp = datatrove_tokenizer, nlp
        self.rules = ChunkRules(nlp)
        self._final, self._is_punct = self.rules.final, self.rules.is_punct
        self._tokens: dict[str, tuple] = {}
        self._effect: dict[str, tuple] = {}
        self._tails: dict[str, frozenset] = {}
        self._opens: dict[str, str] = {}
        self._needs: dict[str, set] = {}  # first token of a continuation -> chunks in `_tails` needing it
        self._pre: dict[str, tuple] = {}
        self._matched: set[str] = set()
        # coverage: chunk look-ups, distinct chunks decided without / with spaCy, texts handed to datatrove
        self.chunks_seen = self.chunks_fast = self.chunks_spacy = self.texts_delegated = 0

    @classmethod
    def for_language(cls, language: str) -> WordSplitter | None:
        return _for_language(language)

    # -- chunks ---------------------------------------------------------------------------
    def _remember(self, chunk: str, tokens: tuple, pre: tuple, matched: bool) -> None:
        first, state, inner = "", False, 0
        final_chars, is_punct = self._final, self._is_punct
        for final, punct in ((t in final_chars, is_punct(t)) for t in tokens):
            if not first:
                if final:
                    first, state = "P", True
                elif not punct:
                    first = "o"
            elif state and not punct and not final:
                inner, state = inner + 1, False
            elif final:
                state = True
        self._tokens[chunk] = tokens
        self._effect[chunk] = (first, inner, state)
        rests = [r for k in range(1, min(len(pre), self.rules.head_len) + 1) for r in self.rules.heads.get(pre[-k:], ())]
        if rests:
            self._tails[chunk] = opening = frozenset(r[0] for r in rests)
            for token in opening:
                self._needs.setdefault(token, set()).add(chunk)
        if pre[0] in self.rules.openers:
            self._opens[chunk] = pre[0]
        if pre != tokens:
            self._pre[chunk] = pre
        if matched:
            self._matched.add(chunk)

    def _split(self, chunks: list[str]) -> list[list]:
        """spaCy's tokens of each chunk, from one call: a newline between chunks is a token of its
        own, so no special-case match crosses from one chunk into another."""
        starts, pos = [], 0
        for c in chunks:
            starts.append(pos)
            pos += len(c) + 1
        out: list[list] = [[] for _ in chunks]
        k, last = 0, len(chunks) - 1
        with self._nlp.memory_zone():
            for t in self.rules.tokenizer("\n".join(chunks)):
                if t.text == "\n":
                    continue
                while k < last and t.idx >= starts[k + 1]:
                    k += 1
                out[k].append(t.text)
        return out

    def _learn(self, chunks: set[str]) -> None:
        touched = []
        for c in sorted(chunks):
            pre = self.rules.affix_tokens(c)
            if self.rules.touched(pre):
                touched.append((c, pre))
            else:
                self._remember(c, pre, pre, False)
        self.chunks_fast += len(chunks) - len(touched)
        self.chunks_spacy += len(touched)
        if touched:  # the special-case matcher may change these: spaCy decides
            for (c, pre), tokens in zip(touched, self._split([c for c, _ in touched])):
                self._remember(c, tuple(tokens), pre, True)

    def _known(self, chunks: list[str]) -> set[str]:
        self.chunks_seen += len(chunks)
        present = set(chunks)
        new = present.difference(self._tokens)
        if new and len(self._tokens) + len(new) > _MEMO_LIMIT:  # start afresh, keeping this text's chunks
            for memo in (self._tokens, self._effect, self._tails, self._opens, self._needs, self._pre, self._matched):
                memo.clear()
            new = present
        if new:
            self._learn(new)
        return present

    def _crossing(self, present: set[str] | list[str]) -> bool:
        """Cheap test: might a pattern continue from one of these chunks (a set, or a list with repeats) into
        another?"""
        # dict views iterate the smaller side (a set's methods would iterate the whole memo)
        opens = self._opens
        if not opens or opens.keys().isdisjoint(present):
            return False
        needs = self._needs
        return any(not needs[first].isdisjoint(present) for first in {opens[c] for c in opens.keys() & present}
                   if first in needs)

    def _crosses(self, parts: list[str]) -> bool:
        """Does a special-case pattern run from a chunk into the next ones (single spaces between),
        token by token, and touch a chunk with a pattern match of its own (which it could shadow)?"""
        chunks, tails, pre = parts[0::2], self._tails, self._pre
        for i in range(len(chunks) - 1):
            a = chunks[i]
            if a not in tails or parts[2 * i + 1] != " " or chunks[i + 1] not in self._opens:
                continue
            pa = pre.get(a) or self._tokens[a]
            for k in range(1, min(len(pa), self.rules.head_len) + 1):
                for rest in self.rules.heads.get(pa[-k:], ()):
                    touched, j = a in self._matched, i + 1
                    while j < len(chunks) and parts[2 * j - 1] == " " and chunks[j]:
                        b = chunks[j]
                        pb = pre.get(b) or self._tokens[b]
                        touched = touched or b in self._matched
                        if pb[:len(rest)] == rest:  # the pattern ends in this chunk
                            if touched:
                                return True
                            break
                        if len(pb) >= len(rest) or rest[:len(pb)] != pb:
                            break
                        rest, j = rest[len(pb):], j + 1  # the pattern goes on past this chunk
        return False

    def _runs(self, text: str) -> list[str] | None:
        """`text` as chunk, whitespace, chunk, ..., chunk (the first and last chunk may be ""), with
        every chunk learnt; None when datatrove's tokenizer must decide."""
        if _BREAKS_SPACY in text:
            self.texts_delegated += 1
            return None
        parts = _RUNS.split(text)
        present = self._known([c for c in parts[0::2] if c])
        if self._crossing(present) and self._crosses(parts):
            self.texts_delegated += 1
            return None
        return parts

    # -- what the filters ask for ---------------------------------------------------------
    def words(self, text: str) -> list[str]:
        """== datatrove's `word_tokenize(text)`: the non-whitespace tokens."""
        if _BREAKS_SPACY in text:
            self.texts_delegated += 1
            return self.datatrove.word_tokenize(text)
        chunks = text.split()
        try:   # every chunk already known (most texts once a worker is warm): no set of the chunks to build
            words = list(chain.from_iterable(map(self._tokens.__getitem__, chunks)))
            self.chunks_seen += len(chunks)
            present: set[str] | list[str] = chunks
        except KeyError:
            present = self._known(chunks)
            words = list(chain.from_iterable(map(self._tokens.__getitem__, chunks)))
        if self._crossing(present) and self._runs(text) is None:
            return self.datatrove.word_tokenize(text)
        return words

    def token_count(self, text: str) -> int:
        """== len(word_tokenize(text))."""
        return len(self.words(text))

    def sentence_count(self, text: str) -> int:
        """== `len(datatrove.utils.text.split_into_sentences(text))` (1 for a text without tokens)."""
        chunks = text.split()
        if (_BREAKS_SPACY not in text and len(chunks) - 1 == text.count(" ")
                and sum(map(len, chunks)) + len(chunks) - 1 == len(text)):
            # only single spaces between chunks: no whitespace tokens
            present = self._known(chunks)
            if not (self._crossing(present) and self._crosses(_RUNS.split(text))):
                count, state = 1, False
                for first, inner, exit_ in map(self._effect.__getitem__, chunks):
                    if first:
                        count += inner + (first == "o" and state)
                        state = exit_
                return count
        parts = self._runs(text)
        if parts is None:
            return max(1, len(self.datatrove.span_tokenize(text)))
        count, state = 1, False
        for i, part in enumerate(parts):
            if i % 2:  # whitespace: a token unless it is the single space after a token
                if state and (part != " " or i == 1 and not parts[0]):
                    count, state = count + 1, False
            elif part:
                first, inner, exit_ = self._effect[part]
                if first:
                    count += inner + (first == "o" and state)
                    state = exit_
        return count

    def sentence_spans(self, text: str) -> list[tuple[int, int]]:
        """== datatrove's `span_tokenize(text)`: (start, end) of each sentence, token-bounded."""
        parts = self._runs(text)
        if parts is None:
            return self.datatrove.span_tokenize(text)
        tokens: list[tuple[int, int, bool, bool]] = []  # start, end, final, punct
        pos = 0
        for i, part in enumerate(parts):
            if i % 2:
                skip = 1 if part[0] == " " and (i > 1 or parts[0]) else 0
                if len(part) > skip:
                    tokens.append((pos + skip, pos + len(part), False, False))
            elif part:
                at = pos
                for t in self._tokens[part]:
                    tokens.append((at, at + len(t), t in self._final, self._is_punct(t)))
                    at += len(t)
            pos += len(part)
        if not tokens:
            return []
        starts, seen = [0], False
        for i, (_, _, final, punct) in enumerate(tokens):
            if seen and not punct and not final:
                starts.append(i)
                seen = False
            elif final:
                seen = True
        ends = starts[1:] + [len(tokens)]
        return [(tokens[a][0], tokens[b - 1][1]) for a, b in zip(starts, ends)]


@cache
def _for_language(language: str) -> WordSplitter | None:
    from datatrove.utils.word_tokenizers import SpaCyTokenizer, load_word_tokenizer

    import_spacy()
    import spacy.tokenizer
    try:
        dt = load_word_tokenizer(language)
    except (ImportError, ValueError):  # datatrove's own path raises it where the filter runs
        return None
    if type(dt) is not SpaCyTokenizer or dt.language == "ja":
        return None
    try:
        nlp = dt.tokenizer
    except ImportError:  # e.g. jieba for Chinese: datatrove's own path reports it when filtering
        return None
    tok = nlp.tokenizer
    if type(tok) is not spacy.tokenizer.Tokenizer or nlp.pipe_names != ["sentencizer"]:
        return None
    if any(any(ch.isspace() for ch in k.strip()) for k in tok.rules or {}):
        return None  # a special case spanning whitespace ties chunks together
    return WordSplitter(dt)
