"""Deterministic per-document sampling plans: which documents of a source a stage uses, how often.

For a source planned at `e` epochs, every document is taken `floor(e)` times and the fractional
epoch is filled with whole documents in a shuffled order until its token share is reached. The
shuffle is seeded from the stage fingerprint and the source name, so the same frozen stage always
gives the same plan, and a changed source list (a new fingerprint) gives a new one, never a
silently shifted old one. A plan is an int32 array of repeat counts per document, in shard order,
saved as `.npy` beside the manifest and referenced (with its sha256) from it. Long-context
stages select documents by length bucket instead (`curation.mixture.longcontext`); their plans hold 0/1.
"""
from __future__ import annotations

import hashlib
from pathlib import Path

import numpy as np

from curation.core.atomic import save_array


def plan_seed(stage_fingerprint: str, source: str) -> int:
    return int.from_bytes(hashlib.sha256(f"{stage_fingerprint}:{source}".encode()).digest()[:8], "little")


def sample_counts(lengths: np.ndarray, epochs: float, seed: int) -> np.ndarray:
    """Repeat count per document; sum(counts * lengths) is within half a document of epochs * sum(lengths)."""
    lengths = np.asarray(lengths, dtype=np.int64)
    full = int(np.floor(epochs + 1e-12))
    counts = np.full(lengths.size, full, dtype=np.int32)
    want = (epochs - full) * int(lengths.sum())
    if want <= 0 or lengths.size == 0:
        return counts
    order = np.random.default_rng(seed).permutation(lengths.size)
    cum = np.cumsum(lengths[order])
    # the shortest prefix reaching the target, or one document less when that lands closer
    k = min(int(np.searchsorted(cum, want, side="left")), lengths.size - 1)
    below = cum[k - 1] if k > 0 else 0
    take = k if want - below < cum[k] - want else k + 1
    counts[order[:take]] += 1
    return counts


def save_counts(path: Path, counts: np.ndarray, lengths: np.ndarray) -> dict:
    """Write a plan (repeat count per document); returns its summary for the manifest."""
    counts = np.asarray(counts, dtype=np.int32)
    return {"documents": int(np.count_nonzero(counts)), "samples": int(counts.sum()),
            "tokens": int((counts.astype(np.int64) * np.asarray(lengths, dtype=np.int64)).sum()),
            **save_array(path, counts)}


def read_plan(path: Path) -> np.ndarray:
    return np.load(path, allow_pickle=False)
