"""Long-context stages: length buckets filled by source priority, short top-up, best-fit-decreasing packing.

A long-context stage declares document-length buckets (upper bounds in tokens, each at most the
stage's sequence length), a token target per bucket and the order in which sources fill them
(Soofi S 3.4). Bucket i holds documents longer than bucket i-1's bound and at most its own.
Each bucket takes whole documents from the first source in `priority`, in a seeded order, until
its target is met, then from the next source. Where the pool is too small, the shortfall is
topped up with shorter documents of the `top_up` sources (the Apertus 1.5 short-context top-up).
The selected documents are packed into sequences of `seq_length` tokens with best-fit
decreasing (Apertus 1.5 3.3). Every bucket is reported, empty ones included.
"""
from __future__ import annotations

import bisect
import hashlib
from dataclasses import dataclass, field

import numpy as np


@dataclass
class BucketResult:
    stage: str
    bucket: int
    lower: int          # exclusive
    upper: int          # inclusive
    target_tokens: int
    filled_tokens: int  # from documents of this bucket's length
    topup_tokens: int   # shorter documents added for a shortfall
    documents: int
    by_source: dict[str, int] = field(default_factory=dict)

    @property
    def realised_tokens(self) -> int:
        return self.filled_tokens + self.topup_tokens


@dataclass
class LongContextPlan:
    counts: dict[str, np.ndarray]      # per source, 0/1 per document: selected or not
    buckets: list[BucketResult]
    packing: np.ndarray                # rows (source index, document index, sequence index)
    sequences: int
    fill: float                        # tokens / (sequences × seq_length)


def _order(n: int, stage: str, source: str, bucket: int) -> np.ndarray:
    seed = int.from_bytes(hashlib.sha256(f"{stage}:{source}:{bucket}".encode()).digest()[:8], "little")
    return np.random.default_rng(seed).permutation(n)


def fill_buckets(stage: str, bounds: list[int], targets: list[int], priority: list[str], top_up: list[str],
                 lengths: dict[str, np.ndarray]) -> tuple[dict[str, np.ndarray], list[BucketResult]]:
    counts = {s: np.zeros(len(v), dtype=np.int32) for s, v in lengths.items()}
    results = []
    for b, (upper, target) in enumerate(zip(bounds, targets)):
        lower = bounds[b - 1] if b else 0
        res = BucketResult(stage, b, lower, upper, int(target), 0, 0, 0)
        for phase, sources, lo, hi in (("fill", priority, lower, upper), ("top_up", top_up, 0, lower)):
            for src in sources:
                lens = lengths[src]
                for i in _order(len(lens), stage, src, b):
                    if res.realised_tokens >= target:
                        break
                    if counts[src][i] or not lo < lens[i] <= hi:
                        continue
                    counts[src][i] = 1
                    n = int(lens[i])
                    if phase == "fill":
                        res.filled_tokens += n
                    else:
                        res.topup_tokens += n
                    res.documents += 1
                    res.by_source[src] = res.by_source.get(src, 0) + n
        results.append(res)
    return counts, results


def best_fit_decreasing(items: list[tuple[int, int, int]], capacity: int) -> tuple[np.ndarray, int]:
    """Pack (length, source index, document index) items into bins of `capacity`.

    Longest first; each goes to the fullest bin it still fits (ties: the lowest bin number).
    Returns rows (source index, document index, bin) and the number of bins."""
    rows = []
    free: list[tuple[int, int]] = []  # (remaining capacity, bin id), kept sorted
    bins = 0
    for length, src, doc in sorted(items, key=lambda t: (-t[0], t[1], t[2])):
        k = bisect.bisect_left(free, (length, -1))
        if k < len(free):
            room, b = free.pop(k)
        else:
            room, b = capacity, bins
            bins += 1
        rows.append((src, doc, b))
        if room - length > 0:
            bisect.insort(free, (room - length, b))
    return np.asarray(rows, dtype=np.int64).reshape(-1, 3), bins


def plan_long_context(stage: str, seq_length: int, bounds: list[int], targets: list[int], priority: list[str],
                      top_up: list[str], lengths: dict[str, np.ndarray], source_order: list[str]) -> LongContextPlan:
    counts, buckets = fill_buckets(stage, bounds, targets, priority, top_up, lengths)
    items = [(int(lengths[s][i]), source_order.index(s), int(i))
             for s in source_order if s in counts for i in np.flatnonzero(counts[s])]
    packing, sequences = best_fit_decreasing(items, seq_length)
    tokens = sum(t[0] for t in items)
    return LongContextPlan(counts, buckets, packing, sequences, tokens / (sequences * seq_length) if sequences else 0.0)
