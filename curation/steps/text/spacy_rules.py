"""What a spaCy tokenizer's rules imply for tokenizing text chunk by chunk (spacy/tokenizer.pyx).

- `Tokenizer._tokenize_affixes` cuts a text into runs of whitespace and non-whitespace
  (`str.isspace`). A run of exactly " " after a token is only that token's trailing space; any other
  whitespace run is one token (minus its first character when that is " " and follows a token).
  Each non-whitespace run ("chunk") is tokenized from the chunk alone: special cases, prefixes,
  suffixes, infixes, `token_match`, `url_match`.
- A chunk that is no special case and that the prefix, suffix and infix patterns leave alone (or
  that `token_match`/`url_match` accepts) is a single token (`ChunkRules.one_token`).
- `Tokenizer._apply_special_cases` then runs a PhraseMatcher over the whole token sequence, with
  one pattern per special case that has an affix or a space (`add_special_case`,
  `faster_heuristics` on): the rule as tokenized without special cases. A match is applied only if
  its text is the rule, so a match across chunks (its text holds a space) is never applied, but the
  overlap filter can let it shadow a match inside a chunk. `ChunkRules` holds the patterns, their
  proper prefixes (`heads`, with their continuations) and what the rules turn into (`results`), and
  a copy of the tokenizer without the matcher (`pre_matcher`), for `WordSplitter`'s check.
"""
from __future__ import annotations


class _Gate:
    """A tokenizer pattern that matches nothing until opened (see `_pre_matcher_tokenizer`)."""

    def __init__(self, fn, nothing):
        self.fn, self.nothing, self.open = fn, nothing, False

    def __call__(self, string):
        return self.fn(string) if self.open else self.nothing


def _pre_matcher_tokenizer(tok):
    """A copy of `tok` without the special-case matcher: `Tokenizer.add_special_case` registers a
    rule with the matcher only when the affix patterns match it at that moment, so the copy is built
    with gated patterns, which are opened afterwards. Its output is `_tokenize_affixes(text, True)`."""
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


def subsequences(tokens: tuple, longest: int):
    return (tokens[i:i + n] for i in range(len(tokens)) for n in range(1, min(longest, len(tokens) - i) + 1))


class ChunkRules:
    """The facts above for one spaCy pipeline (tokenizer + sentencizer)."""

    def __init__(self, nlp):
        import spacy.tokenizer
        from spacy.attrs import IS_PUNCT, ORTH
        tok = nlp.tokenizer
        self.tokenizer, self.pre_matcher = tok, _pre_matcher_tokenizer(tok)
        rules = tok.rules or {}
        self.specials = frozenset(rules)
        self.final = frozenset(nlp.get_pipe("sentencizer").punct_chars)  # sentence-final characters
        self.is_punct = nlp.vocab.lex_attr_getters[IS_PUNCT]
        bare = spacy.tokenizer.Tokenizer(tok.vocab, rules={}, prefix_search=tok.prefix_search,
                                         suffix_search=tok.suffix_search, infix_finditer=tok.infix_finditer,
                                         token_match=tok.token_match, url_match=tok.url_match)
        in_matcher = [r for r in rules if tok.find_prefix(r) or tok.find_infix(r) or tok.find_suffix(r) or " " in r]
        with nlp.memory_zone():
            patterns = {tuple(t.text for t in bare(r)) for r in in_matcher}
        results = {tuple(nlp.vocab.strings[a[ORTH]] if isinstance(a[ORTH], int) else a[ORTH] for a in rules[r])
                   for r in in_matcher}
        heads: dict[tuple, set] = {}
        for pattern in patterns:
            for j in range(1, len(pattern)):
                heads.setdefault(pattern[:j], set()).add(pattern[j:])
        self.patterns, self.results = frozenset(patterns), frozenset(results)
        self.pattern_len = max(map(len, patterns), default=0)
        self.result_len = max(map(len, results), default=0)
        self.heads = {k: tuple(sorted(v)) for k, v in heads.items()}  # pattern prefix -> continuations
        self.head_len = max(map(len, heads), default=0)
        self.openers = frozenset(r[0] for rests in heads.values() for r in rests)

    def one_token(self, chunk: str) -> bool:
        """Provably one token: no special case, and spaCy's affix loop finds nothing to split off."""
        tok = self.tokenizer
        if chunk in self.specials:
            return False
        if tok.token_match is not None and tok.token_match(chunk):
            return True
        if tok.find_prefix(chunk) or tok.find_suffix(chunk):
            return False
        if tok.url_match is not None and tok.url_match(chunk):
            return True
        return not tok.find_infix(chunk)

