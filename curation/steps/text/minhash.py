"""MinHash-LSH for near-duplicate text: shingles, signatures, band keys, LSH parameters.

Signatures are bit-identical to datatrove's `MinhashDedupSignature` (same text simplification,
same word tokenizer, xxh64 shingles, same seeded permutations), so results agree with the peer
exactly; only the work is organised differently, which is where the speed comes from:

- datatrove runs a spaCy pipeline (tokenizer + sentencizer) over each whole simplified text and
  walks every token in Python. spaCy's tokenizer splits on spaces first and tokenizes each
  space-delimited chunk on its own (that is what its internal cache relies on), so we tokenize
  each distinct chunk once, in one spaCy call per document for the chunks not seen before, and
  look the rest up. Tokenizers that segment across spaces (Chinese, Japanese, Vietnamese) or
  carry multi-word special cases are called whole, as datatrove does.
- a chunk of ASCII letters only or digits only that is no special case is its own token, so
  spaCy is called only for the rest (checked against spaCy's output in the tests).
- diacritic stripping is skipped for ASCII text, where it is the identity.
- shingles are de-duplicated before the permutations (the minimum is unchanged).

Permutation i maps a 64-bit shingle hash h to (a_i * h + b_i) mod (2^61 - 1), in numpy uint64
arithmetic exactly as datatrove computes it. Bands of `rows` consecutive minima are hashed (xxh64)
to one 64-bit bucket key each; two documents are candidates when any band key matches.
Defaults follow datatrove: 5-grams, 14 bands × 8 rows.
"""
from __future__ import annotations

import bisect
import re
import unicodedata
from functools import lru_cache
from itertools import accumulate, chain

import numpy as np
import xxhash

from curation.core.extras import import_spacy

MERSENNE = np.uint64((1 << 61) - 1)
NO_SHINGLES = np.uint64(0)  # band key of a text with fewer words than the n-gram: never a bucket
_MEMO_LIMIT = 2_000_000  # distinct chunks remembered before the memo is cleared (memory bound)


class Shingler:
    """text -> uint64 shingle hashes, identical to datatrove's `get_shingles` for `language`."""

    def __init__(self, ngram: int, language: str = "eng"):
        from datatrove.utils.word_tokenizers import SpaCyTokenizer, load_word_tokenizer

        import_spacy()
        self.ngram = ngram
        self._datatrove = load_word_tokenizer(language)
        self._spacy = None
        if isinstance(self._datatrove, SpaCyTokenizer):
            import spacy.tokenizer
            tokenizer = self._datatrove.tokenizer.tokenizer
            multi_word = any(" " in k.strip() for k in tokenizer.rules or {})  # the rule " " is harmless
            if type(tokenizer) is spacy.tokenizer.Tokenizer and not multi_word:
                self._spacy = tokenizer
                self._rules = frozenset(tokenizer.rules or ())
        self._memo: dict[str, list[str]] = {}
        self._split: set[str] = set()   # the memo's chunks that are not one word of their own

    @staticmethod
    @lru_cache(maxsize=2)
    def cached(ngram: int, language: str = "eng") -> Shingler:
        """One per worker process: its word memo carries over from shard to shard (a pure cache)."""
        return Shingler(ngram, language)

    def simplify(self, text: str) -> str:
        text = _simplify(text)
        if text.isascii():
            return text
        # diacritics: NFD, then the combining marks (category Mn) dropped; every mark is outside ASCII, so
        # only the runs of non-ASCII characters are walked (a quarter of the time on European text)
        return _NON_ASCII.sub(_without_marks, unicodedata.normalize("NFD", text)).strip()

    def words(self, text: str) -> list[str]:
        return self._words(self.simplify(text))[0]

    def _words(self, simple: str) -> tuple[list[str], bool]:
        """(the words of a simplified text, whether they are its space-delimited chunks unchanged: then
        " ".join(words) is `simple` itself)."""
        if self._spacy is None:
            return self._datatrove.word_tokenize(simple), False
        chunks = simple.split(" ")
        memo = self._memo
        new = set(chunks).difference(memo)   # one C loop over the chunks
        if new:
            if len(memo) > _MEMO_LIMIT:
                memo.clear()
                self._split.clear()
                new = set(chunks)
            self._learn(sorted(new))   # sorted: spaCy sees the new chunks in one order
        if self._split.isdisjoint(chunks):   # most texts: every chunk is one word
            return chunks, True
        return list(chain.from_iterable(map(memo.__getitem__, chunks))), False

    def _learn(self, chunks: list[str]) -> None:
        """Tokenize chunks not seen before into the memo. An ASCII run of letters only or digits only is one
        token unless it is a special case ("dont" -> "do", "nt"): spaCy's affix and infix rules all need
        punctuation or a letter-digit boundary (units: "0km" -> "0", "km"). The rest go to spaCy in one call."""
        memo = self._memo
        plain = [c for c in chunks if c.isascii() and (c.isalpha() or c.isdigit()) and c not in self._rules]
        memo.update((c, [c]) for c in plain)
        rest = [c for c in chunks if c not in memo]
        if not rest:
            return
        starts, pos = [], 0
        for chunk in rest:
            starts.append(pos)
            pos += len(chunk) + 1
        pieces: list[list[str]] = [[] for _ in rest]
        for token in self._spacy(" ".join(rest)):
            text_ = token.text.strip()
            if text_:
                pieces[bisect.bisect_right(starts, token.idx) - 1].append(text_)
        memo.update(zip(rest, pieces, strict=True))
        self._split.update(c for c, words in zip(rest, pieces, strict=True) if words != [c])

    def hashes(self, text: str) -> np.ndarray:
        """The xxh64 of every n-gram (its words joined by spaces), in text order, repeats included: all a
        signature needs (a minimum does not change with repeats)."""
        simple = self.simplify(text)
        words, same = self._words(simple)
        n = self.ngram
        count = len(words) - n + 1
        if count <= 0:
            return np.zeros(0, dtype=np.uint64)
        joined = simple if same else " ".join(words)  # n-gram i is a slice of it: cheaper than joining n words
        starts = [0, *accumulate(len(w) + 1 for w in words)]
        h = xxhash.xxh64_intdigest
        return np.fromiter((h(joined[starts[i]:starts[i + n] - 1]) for i in range(count)), dtype=np.uint64,
                           count=count)

    def __call__(self, text: str) -> np.ndarray:
        """The distinct n-gram hashes of a text, sorted (datatrove's `get_shingles`)."""
        return np.unique(self.hashes(text))


_NON_ASCII = re.compile(r"[^\x00-\x7f]+")


def _without_marks(run: re.Match) -> str:
    return "".join(c for c in run.group() if unicodedata.category(c) != "Mn")


@lru_cache(maxsize=1)
def _punctuation_or_space() -> re.Pattern:
    """One run of datatrove's punctuation or whitespace (`re`, not `regex`: 2.5 times faster here)."""
    from datatrove.utils.text import PUNCTUATION_TRANS

    return re.compile("[" + re.escape("".join(sorted(map(chr, PUNCTUATION_TRANS)))) + r"\s]+")


@lru_cache(maxsize=1)
def _ascii_punctuation_to_space() -> dict[int, str]:
    """datatrove's ASCII punctuation to a space, for `str.translate` of ASCII text (CPython translates an ASCII
    string through an ASCII table with no dict lookup per character: 2.6 times faster than the substitution)."""
    from datatrove.utils.text import PUNCTUATION_TRANS

    return {cp: " " for cp in PUNCTUATION_TRANS if cp < 128}


def _simplify(text: str) -> str:
    """datatrove's `simplify_text` without diacritic stripping (lowercase, numbers to 0, punctuation to
    spaces, whitespace runs to one space, stripped) in one substitution instead of a per-character
    `str.translate` through a dict and a second regex pass (2.5 times faster on the benchmark's text).
    The same: every run of punctuation and whitespace becomes one space either way; checked for every
    code point against `simplify_text` (tests/steps/text/test_minhash.py)."""
    from datatrove.utils.text import NUMBERS_PATTERN

    text = NUMBERS_PATTERN.sub("0", text.lower())
    if text.isascii():   # punctuation to spaces, then runs of whitespace (str.split's and `\s` alike) to one
        return " ".join(text.translate(_ascii_punctuation_to_space()).split())
    return _punctuation_or_space().sub(" ", text).strip()


def permutations(num_perm: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """datatrove's permutation coefficients (numpy RandomState, same draws)."""
    gen = np.random.RandomState(seed)
    a = gen.randint(1, MERSENNE, dtype=np.uint64, size=num_perm)
    b = gen.randint(0, MERSENNE, dtype=np.uint64, size=num_perm)
    return a, b


def signature(shingles: np.ndarray, a: np.ndarray, b: np.ndarray) -> np.ndarray | None:
    """Minimum of every permutation over the shingles; None for a text without shingles."""
    if shingles.size == 0:
        return None
    return ((shingles[:, None] * a + b) % MERSENNE).min(axis=0)


def signatures_batch(shingles: list[np.ndarray], a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(signatures, empty) of a batch of documents: row d is `signature(shingles[d], a, b)` (zeros where
    document d has no shingles, flagged in `empty`).

    One numpy pass per permutation over the whole batch's shingles, minimum per document by
    `np.minimum.reduceat`, instead of one (shingles × permutations) array per document: the same uint64
    arithmetic, so bit-identical minima, with no Python work per document in the hot loop."""
    n = len(shingles)
    sizes = np.fromiter((s.size for s in shingles), dtype=np.int64, count=n)
    empty = sizes == 0
    out = np.zeros((n, a.size), dtype=np.uint64)
    if n == 0 or empty.all():
        return out, empty
    flat = np.concatenate([s for s in shingles if s.size])
    starts = np.concatenate([[0], np.cumsum(sizes[~empty])[:-1]])
    rows = np.flatnonzero(~empty)
    tmp, high = np.empty_like(flat), np.empty_like(flat)
    for i in range(a.size):
        np.multiply(flat, a[i], out=tmp)
        np.add(tmp, b[i], out=tmp)
        _mod_mersenne(tmp, high)
        out[rows, i] = np.minimum.reduceat(tmp, starts)
    return out, empty


def _mod_mersenne(x: np.ndarray, scratch: np.ndarray) -> None:
    """x %= 2^61 - 1 in place, without a division (uint64 `np.remainder` is 40% slower): x = high * 2^61 + low
    with 2^61 ≡ 1, so x ≡ high + low, which is below 2 * (2^61 - 1); subtracting the modulus once more either
    wraps past 2^64 (keep the sum) or is the remainder, the smaller of the two either way."""
    np.right_shift(x, np.uint64(61), out=scratch)
    np.bitwise_and(x, MERSENNE, out=x)
    np.add(x, scratch, out=x)
    np.subtract(x, MERSENNE, out=scratch)
    np.minimum(x, scratch, out=x)


def band_keys(signatures: np.ndarray, bands: int, rows: int) -> np.ndarray:
    """(n_docs, bands * rows) signatures -> (n_docs, bands) uint64 bucket keys.

    Equal band slices give equal keys, so candidate pairs are exactly those of comparing the slices."""
    n = signatures.shape[0]
    out = np.empty((n, bands), dtype=np.uint64)
    view = np.ascontiguousarray(signatures[:, :bands * rows]).reshape(n, bands, rows)
    for d in range(n):
        for band in range(bands):
            out[d, band] = xxhash.xxh64_intdigest(view[d, band].tobytes(), seed=band) or 1  # 0 is NO_SHINGLES
    return out
