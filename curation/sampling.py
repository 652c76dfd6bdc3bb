"""Deterministic per-document sampling plans: which documents of a source a stage uses, how often.

For a source planned at `e` epochs, every document is taken `floor(e)` times and the fractional
epoch is filled with whole documents in a shuffled order until its token share is reached. The
shuffle is seeded from the stage fingerprint and the source name, so the same frozen stage always
gives the same plan, and a changed source list (a new fingerprint) gives a new one, never a
silently shifted old one. A plan is an int32 array of repeat counts per document, in shard order,
saved as `.npy` beside the manifest and referenced (with its sha256) from it.
"""
from __future__ import annotations

import hashlib
from pathlib import Path

import numpy as np

from curation.shards import read_index


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


def write_plan(prefix: Path, epochs: float, seed: int, path: Path) -> dict:
    """Write the plan for the shard at `prefix`; returns the manifest entry (without the relative path)."""
    _, lengths, _, _ = read_index(Path(f"{prefix}.idx"))
    counts = sample_counts(lengths, epochs, seed)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "wb") as f:
        np.save(f, counts, allow_pickle=False)
    tmp.replace(path)
    return {"seed": seed, "documents": int(np.count_nonzero(counts)), "samples": int(counts.sum()),
            "tokens": int((counts.astype(np.int64) * lengths).sum()),
            "sha256": hashlib.sha256(path.read_bytes()).hexdigest()}


def read_plan(path: Path) -> np.ndarray:
    return np.load(path, allow_pickle=False)
