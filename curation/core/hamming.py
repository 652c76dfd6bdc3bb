"""Hamming-radius search over 64-bit perceptual hashes by multi-index hashing (Norouzi et al. 2012).

The 64 bits are cut into substrings (blocks). Two hashes within distance r differ, by the pigeonhole
principle, in at most floor(r / blocks) bits of at least one substring; so the candidates are the
hashes whose substring, in some block, lies within that small distance of the query's, found by
binary search in one sorted table per block. For the radii images use (r ≤ 5) there are r + 1
blocks, so some block matches exactly and each block costs one lookup; larger radii probe 16-bit
blocks within floor(r / 4) bits. Every candidate is then checked with a popcount, so
the answer is exactly brute force's (tests/core/test_hamming.py), only without touching most hashes
(tests/benchmarks/bench_hamming.py). Used by image decontamination and, later, image dedup.
"""
from __future__ import annotations

from functools import lru_cache
from itertools import combinations

import numpy as np


@lru_cache(maxsize=64)
def _flip_masks(width: int, bits: int) -> np.ndarray:
    """All `width`-bit masks with at most `bits` ones (XOR them onto a value to enumerate its ball)."""
    masks = [0]
    for k in range(1, bits + 1):
        masks += [sum(1 << i for i in combo) for combo in combinations(range(width), k)]
    return np.array(masks, dtype=np.uint64)


class HammingIndex:
    """Exact Hamming-radius search. Radius r ≤ 5 uses r + 1 blocks (near-equal widths, 11 to 64
    bits): a hash within r must equal the query exactly on at least one block, so each block is one
    lookup. Larger radii use `blocks` 16-bit blocks, each probed within floor(r / blocks) bits."""
    MAX_EXACT_BLOCKS = 6

    def __init__(self, hashes: np.ndarray, blocks: int = 4):
        if 64 % blocks:
            raise ValueError("blocks must divide 64")
        self.hashes = np.ascontiguousarray(hashes, dtype=np.uint64)
        self.blocks, self.width = blocks, 64 // blocks
        self._cache: dict[tuple[int, ...], list] = {}

    def _tables(self, widths: tuple[int, ...]) -> list[tuple]:
        """(shift, mask, sorted block values, hash order, hashes in that order) per block, built on first
        use; candidates are read from the sorted copy, so verifying them reads memory in runs."""
        if widths not in self._cache:
            tables, shift = [], 0
            for w in widths:
                mask = np.uint64((1 << w) - 1) if w < 64 else np.uint64(2**64 - 1)
                values = (self.hashes >> np.uint64(shift)) & mask
                order = np.argsort(values, kind="stable")
                tables.append((np.uint64(shift), mask, values[order], order, self.hashes[order]))
                shift += w
            self._cache[widths] = tables
        return self._cache[widths]

    def _layout(self, radius: int) -> tuple[list, np.ndarray]:
        if radius + 1 <= self.MAX_EXACT_BLOCKS:
            m = radius + 1
            widths = tuple(64 // m + (1 if i < 64 % m else 0) for i in range(m))
            return self._tables(widths), np.zeros(1, dtype=np.uint64)
        return self._tables((self.width,) * self.blocks), _flip_masks(self.width, radius // self.blocks)

    def query(self, q: int, radius: int) -> np.ndarray:
        """Indices (ascending) of the hashes within Hamming distance `radius` of `q`."""
        q64 = np.uint64(q)
        tables, masks = self._layout(radius)
        found = []
        if masks.size == 1:   # exact blocks: each block's candidates are one contiguous run
            for shift, mask, values, order, sorted_hashes in tables:
                w = (q64 >> shift) & mask
                lo, hi = values.searchsorted(w, "left"), values.searchsorted(w, "right")
                if hi > lo:
                    found.append(order[lo:hi][np.bitwise_count(sorted_hashes[lo:hi] ^ q64) <= radius])
            return np.unique(np.concatenate(found)).astype(np.int64) if found else np.zeros(0, dtype=np.int64)
        for shift, mask, values, order, sorted_hashes in tables:
            wanted = ((q64 >> shift) & mask) ^ masks
            lo, hi = np.searchsorted(values, wanted, "left"), np.searchsorted(values, wanted, "right")
            n = hi - lo
            if n.any():  # all probe ranges at once: positions lo[i] .. hi[i]-1, concatenated
                pos = np.repeat(lo, n) + np.arange(n.sum()) - np.repeat(np.cumsum(n) - n, n)
                found.append(order[pos[np.bitwise_count(sorted_hashes[pos] ^ q64) <= radius]])
        if not found:
            return np.zeros(0, dtype=np.int64)
        return np.unique(np.concatenate(found)).astype(np.int64)   # verified first, de-duplicated after

    def query_many(self, queries: np.ndarray, radius: int, chunk: int = 4096) -> tuple[np.ndarray, np.ndarray]:
        """All (query index, hash index) pairs within `radius`, sorted; probes of a whole chunk of
        queries go to numpy at once (the way decontamination and dedup ask: many hashes at a time)."""
        queries = np.ascontiguousarray(queries, dtype=np.uint64)
        tables, masks = self._layout(radius)
        out_q, out_h = [], []
        for start in range(0, queries.size, chunk):
            q = queries[start:start + chunk]
            owner = np.repeat(np.arange(q.size, dtype=np.int64), masks.size)
            cand_q, cand_h = [], []
            for shift, mask, values, order, sorted_hashes in tables:
                wanted = (((q >> shift) & mask)[:, None] ^ masks[None, :]).ravel()
                lo, hi = np.searchsorted(values, wanted, "left"), np.searchsorted(values, wanted, "right")
                n = hi - lo
                total = int(n.sum())
                if total:
                    who = np.repeat(owner, n)
                    pos = np.repeat(lo, n) + np.arange(total) - np.repeat(np.cumsum(n) - n, n)
                    ok = np.bitwise_count(sorted_hashes[pos] ^ q[who]) <= radius
                    cand_q.append(who[ok])
                    cand_h.append(order[pos[ok]])
            if not cand_q:
                continue
            cq, ch = np.concatenate(cand_q), np.concatenate(cand_h)
            pairs = np.unique((cq + start) * self.hashes.size + ch)
            out_q.append(pairs // self.hashes.size)
            out_h.append(pairs % self.hashes.size)
        if not out_q:
            return np.zeros(0, np.int64), np.zeros(0, np.int64)
        return np.concatenate(out_q).astype(np.int64), np.concatenate(out_h).astype(np.int64)


def brute_force(hashes: np.ndarray, q: int, radius: int) -> np.ndarray:
    return np.flatnonzero(np.bitwise_count(hashes ^ np.uint64(q)) <= radius).astype(np.int64)
