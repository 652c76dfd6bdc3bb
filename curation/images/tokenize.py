"""The tokenize step of image samples: decode, resize, encode with the image codec, lay out.

Records are taken `batch_size` at a time; within such a group, images of the same post-resize shape
are encoded as one tensor (so no padding, and codes do not depend on the group they came in), and
records leave in their input order. A sample's sequence is its caption's text tokens before or after
the image's layout (`curation.images.codec.layout`), then end-of-document.
"""
from __future__ import annotations

import time
from collections.abc import Iterator
from functools import lru_cache
from pathlib import Path

import numpy as np
import torch

from curation.images.codec import IBQEncoder, layout, target_size, to_pixels
from curation.images.decode import decode
from curation.steps.base import BatchStep, Record
from curation.vocab import Vocabulary


@lru_cache(maxsize=2)
def load_codec(path: str) -> IBQEncoder:
    """A seeded configuration (`*.yaml` with `seed`) or a published checkpoint folder."""
    p = Path(path)
    if p.is_dir():
        return IBQEncoder.from_checkpoint(p)
    import yaml
    cfg = yaml.safe_load(p.read_text())
    return IBQEncoder.seeded(cfg, seed=int(cfg.get("seed", 0)))


class ImageTokenizer(BatchStep):
    name = "tokenize"

    def __init__(self, vocab: Vocabulary, codec: IBQEncoder, *, area: int, caption: str = "after",
                 batch_size: int = 16, **kw):
        super().__init__(**kw)
        self.vocab, self.codec, self.area, self.caption, self.batch_size = vocab, codec, area, caption, batch_size
        if self.codec.config["n_embed"] > vocab.block("image").size:
            raise ValueError(f"the image codec has {self.codec.config['n_embed']} codes; the vocabulary's image "
                             f"block holds {vocab.block('image').size}")

    def _flush(self, batch: list[Record]) -> Iterator[Record]:
        start = time.perf_counter()
        pixels, shapes = {}, {}
        for i, r in enumerate(batch):
            img = decode(r.image)
            size = target_size(img.width, img.height, self.area, self.codec.patch)
            shapes.setdefault(size, []).append(i)
            pixels[i] = to_pixels(img, size)
        codes = {}
        for size, members in sorted(shapes.items()):
            out = self.codec.encode(torch.stack([pixels[i] for i in members]))
            for i, c in zip(members, out.numpy()):
                codes[i] = c
        texts = self.vocab.tokenizer.encode_batch([r.text for r in batch], add_special_tokens=False)
        for i, r in enumerate(batch):
            image = layout(codes[i], self.vocab)
            text = np.asarray(texts[i].ids, dtype=np.int32) if self.caption != "none" else np.zeros(0, np.int32)
            parts = [text, image] if self.caption == "before" else [image, text]
            r.tokens = np.concatenate([*parts, np.asarray([self.vocab.eod_id], dtype=np.int32)])
            r.meta["image_tokens"] = int(codes[i].size)
        self.stats.records_out += len(batch)
        self.stats.seconds += time.perf_counter() - start
        yield from batch
