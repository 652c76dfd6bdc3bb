"""What a spaCy tokenizer's rules imply for tokenizing text chunk by chunk (spacy/tokenizer.pyx).

- `Tokenizer._tokenize_affixes` cuts a text into runs of whitespace and non-whitespace
  (`str.isspace`). A run of exactly " " after a token is only that token's trailing space; any other
  whitespace run is one token (minus its first character when that is " " and follows a token).
  Each non-whitespace run ("chunk") is tokenized from the chunk alone: special cases, prefixes,
  suffixes, infixes, `token_match`, `url_match`.
- How a chunk is cut (`Tokenizer._tokenize` → `_split_affixes`, `_attach_tokens`) depends only on
  the chunk, the special cases (their ORTH texts) and the affix patterns, so `ChunkRules.affix_tokens`
  replays it in Python, statement by statement (the tokenizer's cache holds only results of this
  same procedure, so it changes nothing).
- `Tokenizer._apply_special_cases` then runs a PhraseMatcher over the whole token sequence, with
  one pattern per special case that has an affix or a space (`add_special_case`,
  `faster_heuristics` on): the rule as tokenized without special cases. A match is applied only if
  its text is the rule, so a match across chunks (its text holds a space) is never applied, but the
  overlap filter can let it shadow a match inside a chunk. A chunk whose affix tokens contain no
  pattern is left as it is (`ChunkRules.touched` tells the others, which go to spaCy); `heads` (the
  patterns' proper prefixes, with their continuations) serve `WordSplitter`'s check across chunks.
"""
from __future__ import annotations


def subsequences(tokens: tuple, longest: int):
    return (tokens[i:i + n] for i in range(len(tokens)) for n in range(1, min(longest, len(tokens) - i) + 1))


class ChunkRules:
    """The facts above for one spaCy pipeline (tokenizer + sentencizer)."""

    def __init__(self, nlp):
        import spacy.tokenizer
        from spacy.attrs import IS_PUNCT, ORTH
        tok = nlp.tokenizer
        self.tokenizer = tok
        rules = tok.rules or {}
        # special case -> the texts of its tokens (attributes keyed by id, or by name in user rules)
        self.specials = {r: tuple(a[ORTH] if ORTH in a else a["ORTH"] for a in subs) for r, subs in rules.items()}
        self.final = frozenset(nlp.get_pipe("sentencizer").punct_chars)  # sentence-final characters
        self.is_punct = nlp.vocab.lex_attr_getters[IS_PUNCT]
        bare = spacy.tokenizer.Tokenizer(tok.vocab, rules={}, prefix_search=tok.prefix_search,
                                         suffix_search=tok.suffix_search, infix_finditer=tok.infix_finditer,
                                         token_match=tok.token_match, url_match=tok.url_match)
        in_matcher = [r for r in rules if tok.find_prefix(r) or tok.find_infix(r) or tok.find_suffix(r) or " " in r]
        with nlp.memory_zone():
            patterns = {tuple(t.text for t in bare(r)) for r in in_matcher}
        heads: dict[tuple, set] = {}
        for pattern in patterns:
            for j in range(1, len(pattern)):
                heads.setdefault(pattern[:j], set()).add(pattern[j:])
        self.patterns = frozenset(patterns)
        self.pattern_len = max(map(len, patterns), default=0)
        self._pattern_first = frozenset(p[0] for p in patterns)
        self.heads = {k: tuple(sorted(v)) for k, v in heads.items()}  # pattern prefix -> continuations
        self.head_len = max(map(len, heads), default=0)
        self.openers = frozenset(r[0] for rests in heads.values() for r in rests)

    def touched(self, tokens: tuple) -> bool:
        """Does a special-case pattern occur in these tokens (so that the matcher may act)?"""
        if self._pattern_first.isdisjoint(tokens):
            return False
        return any(sub in self.patterns for sub in subsequences(tokens, self.pattern_len))

    def affix_tokens(self, string: str) -> tuple:
        """The chunk's tokens before the special-case matcher: `Tokenizer._try_specials_and_cache`
        and `Tokenizer._tokenize` (spaCy 3.8, spacy/tokenizer.pyx) with special cases on."""
        specials, tok = self.specials, self.tokenizer
        if string in specials:
            return specials[string]
        token_match, url_match = tok.token_match, tok.url_match
        prefixes: list[str] = []
        suffixes: list[str] = []
        last_size = 0
        while string and len(string) != last_size:  # _split_affixes
            if token_match is not None and token_match(string):
                break
            if string in specials:
                break
            last_size = len(string)
            pre_len = tok.find_prefix(string)
            if pre_len != 0:
                prefix, minus_pre = string[:pre_len], string[pre_len:]
                if minus_pre and minus_pre in specials:
                    string = minus_pre
                    prefixes.append(prefix)
                    break
            suf_len = tok.find_suffix(string[pre_len:])
            if suf_len != 0:
                suffix, minus_suf = string[-suf_len:], string[:-suf_len]
                if minus_suf and minus_suf in specials:
                    string = minus_suf
                    suffixes.append(suffix)
                    break
            if pre_len and suf_len and (pre_len + suf_len) <= len(string):
                string = string[pre_len:-suf_len]
                prefixes.append(prefix)
                suffixes.append(suffix)
            elif pre_len:
                string = minus_pre
                prefixes.append(prefix)
            elif suf_len:
                string = minus_suf
                suffixes.append(suffix)
        tokens = prefixes  # _attach_tokens
        if string:
            if string in specials:
                tokens.extend(specials[string])
            elif (token_match is not None and token_match(string)) or (url_match is not None and url_match(string)):
                tokens.append(string)
            else:
                matches = tok.find_infix(string)
                if not matches:
                    tokens.append(string)
                else:
                    start = 0
                    for match in matches:
                        infix_start, infix_end = match.start(), match.end()
                        if infix_start == 0:  # `start_before_infixes`
                            continue
                        if infix_start != start:
                            tokens.append(string[start:infix_start])
                        if infix_start != infix_end:
                            tokens.append(string[infix_start:infix_end])
                        start = infix_end
                    if string[start:]:
                        tokens.append(string[start:])
        tokens.extend(reversed(suffixes))
        return tuple(tokens)
