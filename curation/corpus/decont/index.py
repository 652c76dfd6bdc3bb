"""The n-gram index over benchmark items and the matching of training documents against it.

Text is normalised and split into words exactly as for MinHash (datatrove's `simplify_text`: lower
case, punctuation and whitespace folded; `curation.steps.text.minhash.Shingler`), and every n-gram of
words (default 13) is hashed to 64 bits. The index is `shards` files, each holding the sorted
n-gram hashes of one hash range (h mod shards) with the item each comes from, so a matching task
holds one shard at a time, whatever the number of benchmarks.

A document is matched against every item it shares an n-gram with; its overlap with an item is the
share of the item's distinct n-grams that occur in the document. Items with fewer words than n have
no n-grams and cannot be matched: they are counted per benchmark (`unindexable`).
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa

from curation.core.atomic import atomic_write_npz
from curation.corpus.decont.benchmarks import Item
from curation.steps.text.minhash import Shingler


def shard_path(folder: Path, k: int) -> Path:
    return folder / f"shard-{k:03d}.npz"


def build_index(items: list[Item], n: int, shards: int, folder: Path) -> pa.Table:
    """Write the index shards; returns the item table (benchmark, item_id, text, ngrams)."""
    shingler = Shingler(n)
    hashes, owners, counts = [], [], []
    for i, item in enumerate(items):
        h = shingler(item.text)
        hashes.append(h)
        owners.append(np.full(h.size, i, dtype=np.int32))
        counts.append(h.size)
    all_h = np.concatenate(hashes) if hashes else np.zeros(0, np.uint64)
    all_o = np.concatenate(owners) if owners else np.zeros(0, np.int32)
    folder.mkdir(parents=True, exist_ok=True)
    part = all_h % np.uint64(shards)
    for k in range(shards):
        mine = part == k
        order = np.lexsort((all_o[mine], all_h[mine]))
        atomic_write_npz(shard_path(folder, k), hashes=all_h[mine][order], items=all_o[mine][order])
    return pa.table({"benchmark": pa.array([it.benchmark for it in items], pa.string()),
                     "item_id": pa.array([it.item_id for it in items], pa.string()),
                     "text": pa.array([it.text for it in items], pa.string()),
                     "ngrams": pa.array(counts, pa.int64())})


def match(doc_hashes: list[np.ndarray], folder: Path, shards: int) -> list[dict[int, int]]:
    """For every document (its distinct n-gram hashes): item -> number of the item's n-grams it contains."""
    found: list[dict[int, int]] = [{} for _ in doc_hashes]
    for k in range(shards):
        with np.load(shard_path(folder, k)) as z:
            H, owners = z["hashes"], z["items"]
        if H.size == 0:
            continue
        for d, h in enumerate(doc_hashes):
            h = h[h % np.uint64(shards) == k]
            lo, hi = np.searchsorted(H, h, "left"), np.searchsorted(H, h, "right")
            n = hi - lo
            if not n.any():
                continue
            starts = np.repeat(lo, n)
            offsets = np.arange(n.sum()) - np.repeat(np.cumsum(n) - n, n)
            items, counts = np.unique(owners[starts + offsets], return_counts=True)
            acc = found[d]
            for it, c in zip(items.tolist(), counts.tolist()):
                acc[it] = acc.get(it, 0) + c
    return found


def overlap_words(doc_words: list[str], item_hashes: set[int], n: int) -> list[bool]:
    """Which document words lie in an n-gram the item also has (for highlighting in the review page)."""
    import xxhash
    marks = [False] * len(doc_words)
    for i in range(len(doc_words) - n + 1):
        if xxhash.xxh64_intdigest(" ".join(doc_words[i:i + n])) in item_hashes:
            for j in range(i, i + n):
                marks[j] = True
    return marks
