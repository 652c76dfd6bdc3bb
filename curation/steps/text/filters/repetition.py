"""The n-gram statistics of datatrove's GopherRepetitionFilter, exact and vectorised.

datatrove builds every n-gram as a Python string, six times for the duplicated n-grams
(n = 5..10) and three times for the top n-grams (2..4): most of the filter's time once the words
are known. Here the same numbers come from integer arrays:

- top n-gram (`find_top_duplicate(get_n_grams(words, n))`): n-grams joined by " " are equal exactly
  when their word tuples are (words never contain whitespace), so each n-gram is a row of word ids;
  the most frequent row, ties going to the one seen first (as `Counter.most_common(1)` does), gives
  the character length times the count.
- duplicated n-grams (`find_all_duplicate(words, n)`): the n-grams are joined *without* separator,
  so different word tuples can spell the same string ("ab"+"c", "a"+"bc"). A polynomial hash of the
  characters (mod 2^31-1, composed word by word) is equal for equal strings, so an n-gram whose hash
  occurs once in the document cannot repeat; datatrove's left-to-right scan is replayed over the
  others only, comparing the real strings. Hash collisions only add work, never change the result.
"""
from __future__ import annotations

import numpy as np

MOD = (1 << 31) - 1  # prime; a product of two residues fits in int64
BASE = pow(2, 32, MOD)  # one code point = one 32-bit digit of the big-endian UTF-32 number


def char_hash(word: str) -> tuple[int, int]:
    """(polynomial hash of the word's code points, BASE ** len(word)), both mod MOD: for a
    concatenation, hash(x + y) = hash(x) * BASE**len(y) + hash(y)."""
    digits = int.from_bytes(word.encode("utf-32-be", "surrogatepass"), "big")
    return digits % MOD, pow(BASE, len(word), MOD)


def top_ngram_chars(ids: np.ndarray, lengths: np.ndarray, n: int) -> int | None:
    """== `find_top_duplicate(get_n_grams(words, n))`, None where datatrove gets no n-grams.

    ids: a dense word id (0 .. distinct words - 1) per position, in any numbering;
    lengths: the character length of each position's word."""
    count = ids.size - n + 1
    if count <= 0:
        return None
    vocab = int(ids.max()) + 1
    if vocab ** n < 1 << 62:
        key = ids[:count].astype(np.int64)
        for k in range(1, n):
            key = key * vocab + ids[k:k + count]
        _, first, counts = np.unique(key, return_index=True, return_counts=True)
    else:
        rows = np.lib.stride_tricks.sliding_window_view(ids, n)
        _, first, counts = np.unique(rows, axis=0, return_index=True, return_counts=True)
    top = counts.max()
    at = int(first[counts == top].min())
    return (int(lengths[at:at + n].sum()) + n - 1) * int(top)


class DuplicateScan:
    """`find_all_duplicate(words, n)` for several n over one document's words."""

    def __init__(self, words: list[str], hashes: np.ndarray, powers: np.ndarray, lengths: np.ndarray):
        self.words, self.hashes, self.powers = words, hashes, powers
        self.starts = np.concatenate([[0], np.cumsum(lengths, dtype=np.int64)])
        self._n, self._g = 0, None
        self._joined: str | None = None

    def _gram_hashes(self, n: int) -> np.ndarray:
        """Hash of every n-gram's concatenation (built on the previous n's when n grows by one)."""
        count = len(self.words) - n + 1
        if self._g is None or n != self._n + 1:
            g = np.zeros(count, dtype=np.int64)
            for k in range(n):
                g = (g * self.powers[k:k + count] + self.hashes[k:k + count]) % MOD
        else:
            g = (self._g[:count] * self.powers[n - 1:n - 1 + count] + self.hashes[n - 1:n - 1 + count]) % MOD
        self._n, self._g = n, g
        return g

    def chars(self, n: int) -> int:
        count = len(self.words) - n + 1
        if count <= 0:
            return 0
        g = self._gram_hashes(n)
        s = np.sort(g)   # most texts repeat no n-gram: a sort and a comparison say so (np.unique took 4x longer)
        repeats = s[1:][s[1:] == s[:-1]]
        if repeats.size == 0:
            return 0
        candidates = np.flatnonzero(np.isin(g, repeats))
        if self._joined is None:
            self._joined = "".join(self.words)
        joined, starts = self._joined, self.starts.tolist()
        seen: set[str] = set()
        repeated = idx = 0
        for p in candidates.tolist():
            if p < idx:
                continue
            gram = joined[starts[p]:starts[p + n]]
            if gram in seen:
                repeated += starts[p + n] - starts[p]
                idx = p + n
            else:
                seen.add(gram)
                idx = p + 1
        return repeated
