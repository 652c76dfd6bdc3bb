"""Hamming-radius search over 64-bit perceptual hashes by multi-index hashing (Norouzi et al. 2012).

The 64 bits are cut into `blocks` substrings. Two hashes within distance r differ, by the pigeonhole
principle, in at most floor(r / blocks) bits of at least one substring; so the candidates are the
hashes whose substring, in some block, lies within that small distance of the query's, found by
binary search in one sorted table per block. Every candidate is then checked with a popcount, so
the answer is exactly brute force's (tests/test_hamming.py), only without touching most hashes
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
    def __init__(self, hashes: np.ndarray, blocks: int = 4):
        if 64 % blocks:
            raise ValueError("blocks must divide 64")
        self.hashes = np.ascontiguousarray(hashes, dtype=np.uint64)
        self.blocks, self.width = blocks, 64 // blocks
        self._mask = np.uint64((1 << self.width) - 1)
        self._tables = []
        for b in range(blocks):
            values = (self.hashes >> np.uint64(b * self.width)) & self._mask
            order = np.argsort(values, kind="stable")
            self._tables.append((values[order], order))

    def query(self, q: int, radius: int) -> np.ndarray:
        """Indices (ascending) of the hashes within Hamming distance `radius` of `q`."""
        q = np.uint64(q)
        masks = _flip_masks(self.width, radius // self.blocks)
        found = []
        for b, (values, order) in enumerate(self._tables):
            wanted = ((q >> np.uint64(b * self.width)) & self._mask) ^ masks
            lo, hi = np.searchsorted(values, wanted, "left"), np.searchsorted(values, wanted, "right")
            n = hi - lo
            if n.any():  # all probe ranges at once: positions lo[i] .. hi[i]-1, concatenated
                found.append(order[np.repeat(lo, n) + np.arange(n.sum()) - np.repeat(np.cumsum(n) - n, n)])
        if not found:
            return np.zeros(0, dtype=np.int64)
        cand = np.concatenate(found)  # verify first, de-duplicate the (few) hits after
        hits = cand[np.bitwise_count(self.hashes[cand] ^ q) <= radius]
        return np.unique(hits).astype(np.int64)


    def query_many(self, queries: np.ndarray, radius: int, chunk: int = 4096) -> tuple[np.ndarray, np.ndarray]:
        """All (query index, hash index) pairs within `radius`, sorted; probes of a whole chunk of
        queries go to numpy at once (the way decontamination and dedup ask: many hashes at a time)."""
        queries = np.ascontiguousarray(queries, dtype=np.uint64)
        masks = _flip_masks(self.width, radius // self.blocks)
        out_q, out_h = [], []
        for start in range(0, queries.size, chunk):
            q = queries[start:start + chunk]
            owner = np.repeat(np.arange(q.size, dtype=np.int64), masks.size)
            cand_q, cand_h = [], []
            for b, (values, order) in enumerate(self._tables):
                wanted = (((q >> np.uint64(b * self.width)) & self._mask)[:, None] ^ masks[None, :]).ravel()
                lo, hi = np.searchsorted(values, wanted, "left"), np.searchsorted(values, wanted, "right")
                n = hi - lo
                total = int(n.sum())
                if total:
                    cand_q.append(np.repeat(owner, n))
                    cand_h.append(order[np.repeat(lo, n) + np.arange(total) - np.repeat(np.cumsum(n) - n, n)])
            if not cand_q:
                continue
            cq, ch = np.concatenate(cand_q), np.concatenate(cand_h)
            ok = np.bitwise_count(self.hashes[ch] ^ q[cq]) <= radius
            pairs = np.unique((cq[ok] + start) * self.hashes.size + ch[ok])
            out_q.append(pairs // self.hashes.size)
            out_h.append(pairs % self.hashes.size)
        if not out_q:
            return np.zeros(0, np.int64), np.zeros(0, np.int64)
        return np.concatenate(out_q).astype(np.int64), np.concatenate(out_h).astype(np.int64)


def brute_force(hashes: np.ndarray, q: int, radius: int) -> np.ndarray:
    return np.flatnonzero(np.bitwise_count(hashes ^ np.uint64(q)) <= radius).astype(np.int64)
