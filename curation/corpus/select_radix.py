"""Exact top-k thresholds per group by radix selection over streamed scores, in bounded memory.

Scores become order-preserving uint64 keys (`to_key`: a float64's bits with the sign flipped, or all
bits flipped for negatives), so ranking scores is ranking integers and equal keys are equal scores.
For every group the window [lo, hi] of keys still holding its k-th highest document starts as the
group's [min, max]; a pass over the data counts the window's documents per bin of the DIGIT bits just
below the common prefix of lo and hi (and each bin's smallest and largest key), then narrows the window
to the bin holding the k-th document. When the window holds one value, that value is the threshold:
`above` documents of the group score more, `tied` exactly it, and the first `quota` of the tied ones
in canonical order are kept. Each pass fixes at least DIGIT more bits, so there are at most
ceil(64 / DIGIT) passes, fewer for float32 values and none for a group whose documents all score alike.
"""
from __future__ import annotations

from collections.abc import Callable, Iterable

import numpy as np

DIGIT = 10                # bits per pass: 1,024 bins × 24 bytes per group being narrowed
BINS = 50                 # the report's histogram over [0, 1] (scores outside are clipped into the end bins)
SIGN = np.uint64(1 << 63)
MAX = np.uint64(np.iinfo(np.uint64).max)


def to_key(scores: np.ndarray) -> np.ndarray:
    u = np.ascontiguousarray(scores, dtype=np.float64).view(np.uint64)
    return np.where(u & SIGN, ~u, u | SIGN)


def from_key(keys: np.ndarray) -> np.ndarray:
    keys = np.asarray(keys, dtype=np.uint64)
    return np.where(keys & SIGN, keys & ~SIGN, ~keys).view(np.float64)


def hist_bin(scores: np.ndarray) -> np.ndarray:
    return np.clip(np.floor(scores * BINS), 0, BINS - 1).astype(np.int64)


def _bin_counts(groups: np.ndarray, scores: np.ndarray, n_groups: int) -> np.ndarray:
    """(n_groups, BINS) document counts per group and histogram bin."""
    idx = groups * BINS + hist_bin(scores)
    return np.bincount(idx, minlength=n_groups * BINS).reshape(n_groups, BINS)


def _grow(a: np.ndarray, n: int, fill) -> np.ndarray:
    if a.shape[0] >= n:
        return a
    return np.concatenate([a, np.full((n - a.shape[0], *a.shape[1:]), fill, dtype=a.dtype)])


class GroupStats:
    """Per group: documents, smallest and largest key, histogram; per (source, group): documents."""

    def __init__(self):
        self.n = np.zeros(0, np.int64)
        self.lo = np.zeros(0, np.uint64)
        self.hi = np.zeros(0, np.uint64)
        self.hist = np.zeros((0, BINS), np.int64)
        self.by_source: dict[str, np.ndarray] = {}

    def add(self, source: str, groups: np.ndarray, scores: np.ndarray) -> None:
        if not groups.size:
            self.by_source.setdefault(source, np.zeros(0, np.int64))
            return
        g = int(groups.max()) + 1
        self.n, self.hist = _grow(self.n, g, 0), _grow(self.hist, g, 0)
        self.lo, self.hi = _grow(self.lo, g, MAX), _grow(self.hi, g, 0)
        keys = to_key(scores)
        self.n += np.bincount(groups, minlength=self.n.size)
        np.minimum.at(self.lo, groups, keys)
        np.maximum.at(self.hi, groups, keys)
        self.hist += _bin_counts(groups, scores, self.n.size)
        mine = _grow(self.by_source.get(source, np.zeros(0, np.int64)), self.n.size, 0)
        self.by_source[source] = mine + np.bincount(groups, minlength=mine.size)

    def counts(self, groups: int) -> list[int]:
        return _grow(self.n, groups, 0).tolist()


class Thresholds:
    """The resolved rule per group; `keep` applies it to shards streamed in canonical order."""

    def __init__(self, key: np.ndarray, above: np.ndarray, tied: np.ndarray, quota: np.ndarray, passes: int):
        self.key, self.above, self.tied, self.quota, self.passes = key, above, tied, quota, passes
        self.seen = np.zeros(key.size, np.int64)           # tied documents met so far
        self.kept_hist = np.zeros((key.size, BINS), np.int64)
        self.kept_by_source: dict[str, np.ndarray] = {}

    def keep(self, source: str, groups: np.ndarray, scores: np.ndarray) -> np.ndarray:
        keys = to_key(scores)
        thr = self.key[groups]
        keep = keys > thr
        tied = np.flatnonzero(keys == thr)
        if tied.size:
            g = groups[tied]
            order = np.argsort(g, kind="stable")        # by group, canonical order within
            gs = g[order]
            start = np.r_[0, np.flatnonzero(gs[1:] != gs[:-1]) + 1]
            run = np.repeat(start, np.diff(np.r_[start, gs.size]))
            rank = self.seen[gs] + (np.arange(gs.size) - run)
            keep[tied[order[rank < self.quota[gs]]]] = True
            self.seen += np.bincount(g, minlength=self.seen.size)
        self.kept_hist += _bin_counts(groups[keep], scores[keep], self.key.size)
        mine = self.kept_by_source.get(source, np.zeros(self.key.size, np.int64))
        self.kept_by_source[source] = mine + np.bincount(groups[keep], minlength=self.key.size)
        return keep

    def summary(self, names: list[str], stats: GroupStats, k: list[int], fractions: dict[str, float],
                field: str) -> dict:
        """Plain rows for the ledger and `selection.json`, groups in name order."""
        thr = from_key(self.key)
        order = sorted(range(len(names)), key=lambda i: names[i])
        n = stats.counts(len(names))
        groups = [{"group": names[i], "documents": n[i], "kept": k[i], "threshold": float(thr[i]),
                   "above": int(self.above[i]), "tied": int(self.tied[i]), "tied_kept": int(self.quota[i]),
                   "top_fraction": fractions[names[i]]} for i in order]
        sources = [{"source": s, "group": names[i], "documents": int(_grow(docs, len(names), 0)[i]),
                    "kept": int(self.kept_by_source.get(s, np.zeros(len(names), np.int64))[i])}
                   for s, docs in stats.by_source.items() for i in order if i < docs.size and docs[i]]
        hist = _grow(stats.hist, len(names), 0)
        bins = [{"group": names[i], "bin": b, "lower": b / BINS, "upper": (b + 1) / BINS,
                 "documents": int(hist[i, b]), "kept": int(self.kept_hist[i, b])}
                for i in order for b in range(BINS) if hist[i, b]]
        return {"field": field, "passes": self.passes, "groups": groups, "sources": sources, "histogram": bins}


def resolve_groups(passes: Callable[[], Iterable[tuple[np.ndarray, np.ndarray]]], stats: GroupStats,
                   k: list[int]) -> Thresholds:
    """Thresholds for top-`k[g]` of every group; `passes()` streams (groups, scores) of the corpus anew."""
    g = len(k)
    lo, hi = _grow(stats.lo, g, MAX).copy(), _grow(stats.hi, g, 0).copy()
    need = np.array(k, dtype=np.int64)
    n = np.array(stats.counts(g), dtype=np.int64)
    above, tied = np.zeros(g, np.int64), n.copy()
    n_passes = 0
    while (active := np.flatnonzero((lo < hi) & (need > 0))).size:
        n_passes += 1
        shift = np.zeros(g, np.uint64)
        for i in active.tolist():
            shift[i] = max(int(lo[i] ^ hi[i]).bit_length() - DIGIT, 0)
        base = lo >> shift
        slot = np.full(g, -1, np.int64)
        slot[active] = np.arange(active.size)
        size = active.size << DIGIT
        counts = np.zeros(size, np.int64)
        mins, maxs = np.full(size, MAX, np.uint64), np.zeros(size, np.uint64)
        for groups, scores in passes():
            keys = to_key(scores)
            inside = (slot[groups] >= 0) & (keys >= lo[groups]) & (keys <= hi[groups])
            gi, ki = groups[inside], keys[inside]
            idx = (slot[gi] << DIGIT) + ((ki >> shift[gi]) - base[gi]).astype(np.int64)
            counts += np.bincount(idx, minlength=size)
            np.minimum.at(mins, idx, ki)
            np.maximum.at(maxs, idx, ki)
        for j, i in enumerate(active.tolist()):
            c = counts[j << DIGIT:(j + 1) << DIGIT]
            from_top = np.cumsum(c[::-1])
            b = (1 << DIGIT) - 1 - int(np.searchsorted(from_top, need[i]))   # the bin of the need-th from the top
            higher = int(from_top[(1 << DIGIT) - 2 - b]) if b < (1 << DIGIT) - 1 else 0
            above[i] += higher
            need[i] -= higher
            lo[i], hi[i] = mins[(j << DIGIT) + b], maxs[(j << DIGIT) + b]
            tied[i] = int(c[b])
    # a group resolved without a pass (one value) keeps `need` of its n tied documents
    return Thresholds(hi.copy(), above, tied, need, n_passes)
