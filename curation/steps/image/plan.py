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

Re-planning for another budget reruns only this arithmetic over the scan. Re-planning for another rank
(GPU) count needs not even that: `Plan.for_ranks(n)` (`RankPlan`) deals the same batches out again, and
splits a batch between ranks where that evens the load (a batch is one shape, so its images all cost the
same and any part of it is still one tensor without padding; codes do not depend on batching). Its
predicted imbalance, tokens per rank max/mean - 1, is at most one image's tokens over the mean load.
"""
from __future__ import annotations

import heapq
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
        """max rank load / mean rank load - 1 of the whole-batch assignment (`rank`)."""
        load = np.bincount(self.rank, weights=self.tokens, minlength=ranks)
        return float(load.max() / load.mean() - 1) if load.sum() else 0.0

    @property
    def images(self) -> np.ndarray:
        """Images per batch."""
        return np.bincount(self.batch, minlength=self.tokens.size)

    def for_ranks(self, ranks: int) -> RankPlan:
        """These batches dealt to `ranks` ranks (no rescan, no re-batching): see `rank_plan`."""
        return rank_plan(self.tokens, self.images, ranks)


@dataclass(frozen=True)
class RankPlan:
    """Batches (or parts of them) per rank: piece i is `images[i]` images of batch `batch[i]` on `rank[i]`."""
    ranks: int
    batch: np.ndarray
    images: np.ndarray
    tokens: np.ndarray
    rank: np.ndarray

    @property
    def load(self) -> np.ndarray:
        """Tokens per rank."""
        return np.bincount(self.rank, weights=self.tokens, minlength=self.ranks).astype(np.int64)

    @property
    def imbalance(self) -> float:
        """Predicted imbalance: tokens per rank, max / mean - 1 (0 for no work)."""
        load = self.load
        return float(load.max() / load.mean() - 1) if load.sum() else 0.0


def rank_plan(tokens: np.ndarray, images: np.ndarray, ranks: int) -> RankPlan:
    """Deal batches (`tokens` and `images` per batch, one image shape each) to `ranks` ranks.

    Largest batch first to the least loaded rank (ties: the lowest rank); a batch that would take that
    rank past the even share `ceil(total / ranks)` gives it only the images that fit (at least one) and
    the rest goes back in line. Every rank then ends within one image of the even share, unless there are
    fewer images than ranks. Deterministic: the same batches give the same pieces."""
    if ranks < 1:
        raise ValueError(f"ranks {ranks}: at least 1")
    tokens, images = np.asarray(tokens, dtype=np.int64), np.asarray(images, dtype=np.int64)
    if tokens.size and (images < 1).any():
        raise ValueError("every batch holds at least one image")
    share = -(-int(tokens.sum()) // ranks)
    # max-heap of remaining pieces (-tokens, batch, images); min-heap of ranks (load, rank)
    todo = [(-int(t), b, int(n)) for b, (t, n) in enumerate(zip(tokens.tolist(), images.tolist()))]
    heapq.heapify(todo)
    free = [(0, r) for r in range(ranks)]
    out_b, out_n, out_t, out_r = [], [], [], []
    while todo:
        neg, b, n = heapq.heappop(todo)
        t, per = -neg, -neg // n
        load, r = heapq.heappop(free)
        take = n if load + t <= share else max(1, min(n, (share - load) // per))
        out_b.append(b), out_n.append(take), out_t.append(take * per), out_r.append(r)
        heapq.heappush(free, (load + take * per, r))
        if take < n:
            heapq.heappush(todo, (-(n - take) * per, b, n - take))
    pieces: dict[tuple[int, int], int] = {}
    for b, n, r in zip(out_b, out_n, out_r):
        pieces[(b, r)] = pieces.get((b, r), 0) + n
    per = {b: int(t) // int(n) for b, (t, n) in enumerate(zip(tokens.tolist(), images.tolist()))}
    _even_out(pieces, per, ranks)
    keys = sorted(k for k, n in pieces.items() if n)
    b_, r_ = (np.asarray([k[i] for k in keys], dtype=np.int64) for i in (0, 1))
    n_ = np.asarray([pieces[k] for k in keys], dtype=np.int64)
    t_ = n_ * np.asarray([per[b] for b in b_.tolist()], dtype=np.int64)
    return RankPlan(ranks, b_, n_, t_, r_)


def _even_out(pieces: dict[tuple[int, int], int], per: dict[int, int], ranks: int, rounds: int | None = None) -> None:
    """Refine in place: while it lowers the busiest rank's load, move one image from the busiest rank to the
    idlest, or swap one of its images for a smaller one there (images of different shapes cost differently,
    so dealing whole images can leave a rank above the even share that a swap brings down)."""
    load = [0] * ranks
    on: list[dict[int, int]] = [{} for _ in range(ranks)]   # rank -> {batch: images}
    for (b, r), n in pieces.items():
        load[r] += n * per[b]
        on[r][b] = on[r].get(b, 0) + n
    for _ in range(rounds if rounds is not None else 4 * ranks):
        hi = max(range(ranks), key=lambda r: (load[r], -r))
        lo = min(range(ranks), key=lambda r: (load[r], r))
        gap = load[hi] - load[lo]
        best = None   # (new max of the two, batch moved to lo, batch moved to hi or None)
        for a in sorted(on[hi]):
            for b in [None, *sorted(on[lo])]:
                d = per[a] - (per[b] if b is not None else 0)
                if 0 < d < gap:
                    cand = (max(load[hi] - d, load[lo] + d), a, b)
                    best = cand if best is None or cand < best else best
        if best is None:
            return
        _, a, b = best
        for batch, src, dst in ((a, hi, lo), *(((b, lo, hi),) if b is not None else ())):
            on[src][batch] -= 1
            if not on[src][batch]:
                del on[src][batch]
            on[dst][batch] = on[dst].get(batch, 0) + 1
            pieces[(batch, src)] -= 1
            pieces[(batch, dst)] = pieces.get((batch, dst), 0) + 1
            load[src] -= per[batch]
            load[dst] += per[batch]


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
