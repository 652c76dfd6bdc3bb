"""The tokenize step of image samples: plan, load, encode with the image codec, lay out, write.

A task's images are first assigned to batches by `curation.steps.image.plan` (shape-uniform, at most
`batch_tokens` codes each, so every batch is one tensor without padding and codes never depend on
batching). Batches are then written in plan order: while the codec encodes batch k, a loader thread
decodes, resizes and tokenizes the captions of batch k+1 (`prefetch`). After every batch the
`ResumableWriter` checkpoints, so a killed task resumes at its first unwritten batch and writes the
same bytes as an uninterrupted one. A sample's sequence is its caption's text tokens before or after
the image's layout (`curation.steps.image.codec.layout`), then end-of-document.
"""
from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import torch

from curation.core.record import Record, StepStats
from curation.core.vocab import Vocabulary
from curation.shards import ResumableWriter
from curation.steps import codecs
from curation.steps.base import Step
from curation.steps.image.codec import IBQEncoder, layout, to_pixels
from curation.steps.image.decode import decode
from curation.steps.image.plan import plan
from curation.steps.image.resize import target_size


def load_codec(path: str) -> IBQEncoder:
    """The image codec at `path`: `curation.steps.codecs.load_codec` for the IBQ family."""
    return codecs.load_codec(path, IBQEncoder)


class ImageTokenizer(Step):
    name = "tokenize"

    def __init__(self, vocab: Vocabulary, codec: IBQEncoder, *, area: int, caption: str = "after",
                 batch_tokens: int = 16384, prefetch: bool = True, **kw):
        super().__init__(**kw)
        self.vocab, self.codec, self.area, self.caption = vocab, codec, area, caption
        self.batch_tokens, self.prefetch = batch_tokens, prefetch
        self.timing = {"load": 0.0, "encode": 0.0, "wall": 0.0}   # seconds, for benchmarks
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
        order = np.lexsort((np.arange(len(records)), p.batch))
        return [list(map(int, idx)) for idx in np.split(order, np.flatnonzero(np.diff(p.batch[order])) + 1)]

    def _load(self, batch: list[Record]) -> tuple[torch.Tensor, list[list[int]]]:
        start = time.perf_counter()
        pixels = []
        for r in batch:
            img = decode(r.image)
            pixels.append(to_pixels(img, target_size(img.width, img.height, self.area, self.codec.patch)))
        texts = [e.ids for e in self.vocab.tokenizer.encode_batch([r.text for r in batch], add_special_tokens=False)]
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

    def write(self, records: list[Record], writer: ResumableWriter) -> None:
        """Encode `records` batch by batch into `writer`, from its first unwritten batch on."""
        wall = time.perf_counter()
        plan_batches = self.batches(records)
        if writer.batches_done:
            self.stats = StepStats.from_json(writer.extra["stats"])
        else:
            self.stats.records_in = len(records)
        todo = [[records[i] for i in b] for b in plan_batches[writer.batches_done:]]
        with ThreadPoolExecutor(max_workers=1) as pool:
            nxt = pool.submit(self._load, todo[0]) if todo and self.prefetch else None
            for k, batch in enumerate(todo):
                if self.prefetch:
                    pixels, texts = nxt.result()
                    nxt = pool.submit(self._load, todo[k + 1]) if k + 1 < len(todo) else None
                else:
                    pixels, texts = self._load(batch)
                start = time.perf_counter()
                codes = self.codec.encode(pixels).numpy()
                self.timing["encode"] += time.perf_counter() - start
                self.stats.records_out += len(batch)
                self.stats.notes["batches"] += 1
                writer.add_batch(self._sequences(codes, texts), extra={"stats": self.stats.to_json()})
        self.timing["wall"] += time.perf_counter() - wall
        self.stats.seconds += time.perf_counter() - wall
