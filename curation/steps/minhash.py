"""MinHash-LSH for near-duplicate text: shingles, signatures, band hashes, LSH parameters.

Text is simplified as datatrove does (lower case, punctuation removed, digits folded to 0,
whitespace collapsed), split into words and shingled into word n-grams (default 5). Each shingle
is hashed to 32 bits (xxh32); permutation i maps a hash h to ((a_i * h + b_i) mod (2^61 - 1)) & (2^32 - 1)
with a_i, b_i drawn from a fixed seed, so 32-bit inputs and coefficients never overflow 64-bit
integers. A document's signature is the minimum per permutation, computed for all permutations at
once with numpy. Bands of `rows` consecutive minima are hashed (xxh64) to one 64-bit bucket key each;
two documents are candidates when any band key matches. Defaults follow datatrove: 5-grams,
14 bands × 8 rows.
"""
from __future__ import annotations

import re
import unicodedata

import numpy as np
import xxhash

MERSENNE = np.uint64((1 << 61) - 1)
MAX32 = np.uint64((1 << 32) - 1)
EMPTY = np.uint32(0xFFFFFFFF)

_PUNCT = re.compile(r"[^\w\s]|_", re.UNICODE)
_DIGITS = re.compile(r"\d")
_SPACE = re.compile(r"\s+")


def simplify(text: str) -> str:
    text = unicodedata.normalize("NFKC", text).lower()
    text = _DIGITS.sub("0", _PUNCT.sub(" ", text))
    return _SPACE.sub(" ", text).strip()


def shingle_hashes(text: str, ngram: int) -> np.ndarray:
    words = simplify(text).split(" ")
    if not words or words == [""]:
        return np.zeros(0, dtype=np.uint64)
    n = max(1, min(ngram, len(words)))
    grams = {" ".join(words[i:i + n]) for i in range(len(words) - n + 1)}
    return np.fromiter((xxhash.xxh32_intdigest(g) for g in grams), dtype=np.uint64, count=len(grams))


def permutations(num_perm: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    a = rng.integers(1, 1 << 32, num_perm, dtype=np.uint64)
    b = rng.integers(0, 1 << 32, num_perm, dtype=np.uint64)
    return a, b


def signature(hashes: np.ndarray, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    if hashes.size == 0:
        return np.full(a.size, EMPTY, dtype=np.uint32)
    values = (np.outer(hashes, a) + b) % MERSENNE & MAX32
    return values.min(axis=0).astype(np.uint32)


def band_keys(signatures: np.ndarray, bands: int, rows: int) -> np.ndarray:
    """(n_docs, bands * rows) unsigned signatures -> (n_docs, bands) uint64 bucket keys.

    Equal band slices give equal keys, so candidate pairs are exactly those of comparing the slices."""
    n = signatures.shape[0]
    out = np.empty((n, bands), dtype=np.uint64)
    view = np.ascontiguousarray(signatures[:, :bands * rows]).reshape(n, bands, rows)
    for d in range(n):
        for band in range(bands):
            out[d, band] = xxhash.xxh64_intdigest(view[d, band].tobytes(), seed=band)
    return out


def candidate_probability(jaccard: float, bands: int, rows: int) -> float:
    return 1 - (1 - jaccard ** rows) ** bands


def params_for_threshold(threshold: float, num_perm: int = 112) -> tuple[int, int]:
    """Bands × rows (≤ num_perm) minimising false-positive plus false-negative area around `threshold`
    (the criterion datasketch uses), by numerical integration."""
    xs = np.linspace(0, 1, 2001)
    best, best_err = (1, 1), float("inf")
    for rows in range(1, num_perm + 1):
        for bands in range(1, num_perm // rows + 1):
            p = 1 - (1 - xs ** rows) ** bands
            fp = np.trapezoid(np.where(xs < threshold, p, 0), xs)
            fn = np.trapezoid(np.where(xs >= threshold, 1 - p, 0), xs)
            if fp + fn < best_err:
                best, best_err = (bands, rows), fp + fn
    return best
