"""The tokenize step of image samples: plan, load, encode with the image codec, lay out.

A task's images are first assigned to batches by `curation.steps.image.plan` (shape-uniform, at most
`batch_tokens` codes each, so every batch is one tensor without padding and codes never depend on
batching). Batches are then encoded in plan order, and samples are emitted in that order: while the
codec encodes batch k, a loader thread decodes, resizes and tokenizes the captions of batch k+1
(`curation.steps.encode.prefetch`). The codes of every batch are checkpointed
(`curation.steps.encode.BatchCodes`), so a killed task resumes at its first unsaved batch and writes
the same bytes as an uninterrupted one. A sample's sequence is its caption's text tokens before or
after the image's layout (`curation.steps.image.codec.layout`), then end-of-document.
"""
from __future__ import annotations

import time
from collections.abc import Iterator

import numpy as np
import torch

from curation.core.record import Record
from curation.core.vocab import Vocabulary
from curation.steps.base import ShardStep
from curation.steps.encode import BatchCodes, prefetch
from curation.steps.image.codec import IBQEncoder, layout, to_pixels
from curation.steps.image.decode import decode
from curation.steps.image.plan import plan
from curation.steps.image.resize import target_size


class ImageTokenizer(ShardStep):
    name = "tokenize"

    def __init__(self, vocab: Vocabulary, codec: IBQEncoder, *, area: int, caption: str = "after",
                 batch_tokens: int = 16384, checkpoint: BatchCodes | None = None, prefetch: bool = True, **kw):
        super().__init__(**kw)
        self.vocab, self.codec, self.area, self.caption = vocab, codec, area, caption
        self.batch_tokens, self.prefetch, self.checkpoint = batch_tokens, prefetch, checkpoint
        self.timing = {"load": 0.0, "encode": 0.0, "wall": 0.0}   # seconds, for benchmarks
        self.planned: list[list[int]] = []   # [tokens, images] per planned batch: the run's rank plan (ledger)
        if self.codec.config["n_embed"] > vocab.block("image").size:
            raise ValueError(f"the image codec has {self.codec.config['n_embed']} codes; the vocabulary's image "
                             f"block holds {vocab.block('image').size}")

    def batches(self, records: list[Record]) -> list[list[int]]:
        """Record indices per batch, in plan order (every sample is its own document)."""
        if not records:
            return []
        width = np.asarray([r.meta["width"] for r in records])
        height = np.asarray([r.meta["height"] for r in records])
        p = plan(width, height, np.arange(len(records)), area=self.area, budget=self.batch_tokens, ranks=1,
                 patch=self.codec.patch)
        self.planned += [[int(t), int(n)] for t, n in zip(p.tokens, p.images)]
        order = np.lexsort((np.arange(len(records)), p.batch))
        return [list(map(int, idx)) for idx in np.split(order, np.flatnonzero(np.diff(p.batch[order])) + 1)]

    def _texts(self, batch: list[Record]) -> list[list[int]]:
        return [e.ids for e in self.vocab.tokenizer.encode_batch([r.text for r in batch], add_special_tokens=False)]

    def _load(self, batch: list[Record]) -> tuple[torch.Tensor, list[list[int]]]:
        start = time.perf_counter()
        pixels = []
        for r in batch:
            img = decode(r.payload["image"])
            pixels.append(to_pixels(img, target_size(img.width, img.height, self.area, self.codec.patch)))
        texts = self._texts(batch)
        self.timing["load"] += time.perf_counter() - start
        return torch.stack(pixels), texts

    def _sequences(self, codes: np.ndarray, texts: list[list[int]]) -> list[np.ndarray]:
        out = []
        for c, t in zip(codes, texts):
            text = np.asarray(t if self.caption != "none" else [], dtype=np.int32)
            image = layout(c, self.vocab)
            parts = [text, image] if self.caption == "before" else [image, text]
            out.append(np.concatenate([*parts, np.asarray([self.vocab.eod_id], dtype=np.int32)]))
        return out

    def encode(self, records: list[Record]) -> Iterator[Record]:
        wall = time.perf_counter()
        batches = [[records[i] for i in b] for b in self.batches(records)]
        ids = [[r.id for r in b] for b in batches]
        saved = {k: c for k in range(len(batches))
                 if self.checkpoint is not None and (c := self.checkpoint.load(k, ids[k])) is not None}
        fresh = prefetch([k for k in range(len(batches)) if k not in saved], lambda k: self._load(batches[k]),
                         enabled=self.prefetch)
        for k, batch in enumerate(batches):
            if k in saved:
                codes, texts = np.stack(saved[k]), self._texts(batch)
            else:
                _, (pixels, texts) = next(fresh)
                start = time.perf_counter()
                codes = self.codec.encode(pixels).numpy()
                self.timing["encode"] += time.perf_counter() - start
                if self.checkpoint is not None:
                    self.checkpoint.save(k, ids[k], list(codes))
            self.stats.notes["batches"] += 1
            for record, seq in zip(batch, self._sequences(codes, texts)):
                record.shards = {"": [seq]}
                yield record
        self.timing["wall"] += time.perf_counter() - wall
