"""The image encoder's machinery for records that hold several images (interleaved documents, conversations).

`encode_images(items, codec, ...)` runs the same pipeline as the image tokenizer (`curation.steps.image
.tokenize`): the NumPy batch plan (`curation.steps.image.plan`: shape-uniform batches of at most
`batch_tokens` codes, no padding, so codes never depend on batching), a loader thread decoding and
resizing batch k+1 while the codec encodes batch k (`curation.steps.encode.prefetch`), and a checkpoint
of every batch's codes (`curation.steps.encode.BatchCodes`: a killed task re-encodes only unsaved
batches). Items carry their record's index as `group`: the plan keeps a record's images inside one
window, so codes come back window by window, and a caller can write every record whose images are
all done while later windows are still to encode (memory holds one window's codes, not the shard's).
"""
from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np
import torch

from curation.steps.encode import BatchCodes, prefetch
from curation.steps.image.codec import to_pixels
from curation.steps.image.decode import decode
from curation.steps.image.plan import plan
from curation.steps.image.resize import target_size


@dataclass(frozen=True)
class ImageItem:
    key: str           # unique within the task: the checkpoint's ids
    data: bytes        # the encoded image
    width: int         # its size as validated (before resizing)
    height: int
    group: int         # the index of the record it belongs to, non-decreasing over the items


def encode_images(items: list[ImageItem], codec, *, area: int, batch_tokens: int,
                  checkpoint: BatchCodes | None = None, first_batch: int = 0, use_prefetch: bool = True,
                  timing: dict | None = None, window: int = 4096,
                  planned: list | None = None) -> Iterator[tuple[int, dict[str, np.ndarray], int]]:
    """(groups done, {key: (h, w) codes} of one window, batches in it) per plan window, in order: every item
    of a group below `groups done` has its codes. Batch k is checkpointed as `first_batch + k`. `planned`
    receives [tokens, images] per planned batch (the run's rank plan, `curation.ledger.ranks`)."""
    timing = timing if timing is not None else {}
    if not items:
        return
    groups = np.asarray([it.group for it in items])
    if (np.diff(groups) < 0).any():
        raise ValueError("image items must come in record order (non-decreasing group)")
    p = plan(np.asarray([it.width for it in items]), np.asarray([it.height for it in items]), groups, area=area,
             budget=batch_tokens, ranks=1, window=window, patch=codec.patch)
    if planned is not None:
        planned += [[int(t), int(n)] for t, n in zip(p.tokens, p.images)]
    order = np.lexsort((np.arange(len(items)), p.batch))
    batches = [list(map(int, b)) for b in np.split(order, np.flatnonzero(np.diff(p.batch[order])) + 1)]
    keys = [[items[i].key for i in b] for b in batches]
    saved = {k: c for k in range(len(batches))
             if checkpoint is not None and (c := checkpoint.load(first_batch + k, keys[k])) is not None}

    def load(k: int) -> torch.Tensor:
        start = time.perf_counter()
        pixels = []
        for i in batches[k]:
            img = decode(items[i].data)
            pixels.append(to_pixels(img, target_size(img.width, img.height, area, codec.patch)))
        timing["load"] = timing.get("load", 0.0) + time.perf_counter() - start
        return torch.stack(pixels)

    fresh = prefetch([k for k in range(len(batches)) if k not in saved], load, enabled=use_prefetch)
    done: dict[str, np.ndarray] = {}
    count = 0
    for k, batch in enumerate(batches):
        if k in saved:
            codes = saved[k]
        else:
            _, pixels = next(fresh)
            start = time.perf_counter()
            codes = list(codec.encode(pixels).numpy())
            timing["encode"] = timing.get("encode", 0.0) + time.perf_counter() - start
            if checkpoint is not None:
                checkpoint.save(first_batch + k, keys[k], codes)
        done.update(zip(keys[k], codes))
        count += 1
        w = p.window[batch[0]]
        if k + 1 == len(batches) or p.window[batches[k + 1][0]] != w:
            last = int(groups[p.window == w].max())
            yield last + 1, done, count
            done, count = {}, 0


def batch_count(items: list[ImageItem], codec, *, area: int, batch_tokens: int, window: int = 4096) -> int:
    """Batches `encode_images` plans for `items` (where a caller's next checkpoint numbers start)."""
    if not items:
        return 0
    p = plan(np.asarray([it.width for it in items]), np.asarray([it.height for it in items]),
             np.asarray([it.group for it in items]), area=area, budget=batch_tokens, ranks=1, window=window,
             patch=codec.patch)
    return int(p.tokens.size)
