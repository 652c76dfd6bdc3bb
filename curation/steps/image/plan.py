"""The tokenization plan: every image assigned to a batch, NumPy only, deterministic.

1. Each image's post-resize shape comes from its scanned size by the encoder path's own resize rule
   (`curation.steps.image.resize.target_size`: about `area` pixels, sides multiples of 16); its token
   count is (h/16)·(w/16).
2. Rows are cut into windows of about `window` consecutive rows, each cut moved forward to the next
   document boundary (images of one document never straddle windows, so a document's images are
   encoded together and can be written in order).
3. Within a window, images are sorted by exact shape (then row) and packed greedily into batches of
   at most `budget` tokens, one shape per batch: every batch is one tensor, no padding.
4. Batches go to ranks by longest-processing-time first (largest batch to the least loaded rank, ties
   to the lowest rank), so ranks never communicate and the imbalance is small.

Re-planning for another budget or rank count reruns only this arithmetic over the scan.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from curation.steps.image.resize import target_size


@dataclass(frozen=True)
class Plan:
    batch: np.ndarray      # batch id per image (row order)
    rank: np.ndarray       # rank per batch
    tokens: np.ndarray     # tokens per batch
    shape: np.ndarray      # (height, width) in pixels per batch
    window: np.ndarray     # window id per image (row order)

    def imbalance(self, ranks: int) -> float:
        """max rank load / mean rank load - 1."""
        load = np.bincount(self.rank, weights=self.tokens, minlength=ranks)
        return float(load.max() / load.mean() - 1) if load.sum() else 0.0


def plan(width: np.ndarray, height: np.ndarray, document: np.ndarray, *, area: int, budget: int,
         ranks: int, window: int = 4096, patch: int = 16) -> Plan:
    n = width.size
    w, h = target_size(np.asarray(width), np.asarray(height), area, patch)
    tokens = (w // patch) * (h // patch)
    if (tokens > budget).any():
        raise ValueError(f"an image needs {int(tokens.max())} tokens, more than the batch budget {budget}")
    document = np.asarray(document)
    boundary = np.ones(n + 1, dtype=bool)
    boundary[1:n] = document[1:] != document[:-1]
    cuts, start = [0], 0
    starts = np.flatnonzero(boundary)
    while start < n:
        nxt = starts[np.searchsorted(starts, start + window)] if start + window < n else n
        cuts.append(int(nxt))
        start = int(nxt)
    batch = np.empty(n, dtype=np.int64)
    window_of = np.repeat(np.arange(len(cuts) - 1), np.diff(cuts))
    b_tokens, b_shape, next_id = [], [], 0
    for a, z in zip(cuts[:-1], cuts[1:]):
        rows = np.arange(a, z)
        order = rows[np.lexsort((rows, w[rows], h[rows]))]
        current, used, shape = [], 0, None
        for r in order.tolist():
            s = (int(h[r]), int(w[r]))
            if current and (s != shape or used + tokens[r] > budget):
                batch[current] = next_id
                b_tokens.append(used)
                b_shape.append(shape)
                next_id, current, used = next_id + 1, [], 0
            current.append(r)
            used += int(tokens[r])
            shape = s
        if current:
            batch[current] = next_id
            b_tokens.append(used)
            b_shape.append(shape)
            next_id += 1
    b_tokens = np.asarray(b_tokens, dtype=np.int64)
    rank = np.empty(b_tokens.size, dtype=np.int64)
    load = np.zeros(ranks, dtype=np.int64)
    for b in np.lexsort((np.arange(b_tokens.size), -b_tokens)).tolist():
        r = int(np.argmin(load))
        rank[b] = r
        load[r] += b_tokens[b]
    return Plan(batch, rank, b_tokens, np.asarray(b_shape, dtype=np.int64).reshape(-1, 2), window_of)
