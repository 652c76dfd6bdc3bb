"""The tokenize step of interleaved documents: one sequence per document, its text runs and image blocks in
reading order.

First the images the corpus-wide phases removed one by one (`meta["drop_images"]`, noted by the drop
steps: a near-duplicate image inside a document) leave their documents and are counted by reason; a
document left with fewer than `interleaved.min_images` images is dropped (`too_few_images`). Then every
image of the shard goes through the image encoder's machinery (`curation.steps.image.batches`: the batch
plan, the prefetching loader, the codec, a checkpoint per batch), and each document is laid out as

    text run, image block, text run, ..., end-of-document

where a text run is the document's consecutive text segments joined by a blank line, tokenized as text,
and an image block is `curation.steps.image.codec.layout` of its codes: image start, "H*W" (text
tokens), size end, rows of codes with end-of-row markers, image end. Documents are written in shard
order, window by window of the plan. Every document's images are conserved (listed = tokenized +
removed by reason) and the step's notes hold what the ledger's `interleaved` table reports: documents,
images tokenized, images listed, images removed by reason, codes, text runs, batches.
"""
from __future__ import annotations

import time
from collections.abc import Iterator

import numpy as np

from curation.core.record import Record
from curation.core.vocab import Vocabulary
from curation.steps.base import ShardStep
from curation.steps.encode import BatchCodes
from curation.steps.image.batches import ImageItem, encode_images
from curation.steps.image.codec import layout
from curation.steps.interleaved.document import (
    check_images,
    remove_images,
    runs,
    segments,
    text_count,
)


class InterleavedTokenizer(ShardStep):
    name = "tokenize"

    def __init__(self, vocab: Vocabulary, codec, *, area: int, batch_tokens: int = 16384, min_images: int = 1,
                 checkpoint: BatchCodes | None = None, prefetch: bool = True, window: int = 4096, **kw):
        super().__init__(**kw)
        self.vocab, self.codec, self.area, self.batch_tokens = vocab, codec, area, batch_tokens
        self.min_images, self.checkpoint, self.prefetch, self.window = min_images, checkpoint, prefetch, window
        self.timing = {"load": 0.0, "encode": 0.0, "wall": 0.0}
        self.planned: list[list[int]] = []   # [tokens, images] per planned batch (the run's rank plan)
        if codec.config["n_embed"] > vocab.block("image").size:
            raise ValueError(f"the image codec has {codec.config['n_embed']} codes; the vocabulary's image block "
                             f"holds {vocab.block('image').size}")

    def _documents(self, records: list[Record]) -> list[tuple[Record, list[str]]]:
        """The documents that stay, with their text segments; phase-listed images removed first."""
        keep = []
        for r in records:
            listed = r.meta.pop("drop_images", None)
            if listed:
                remove_images(r, {int(k): reason for k, reason in listed.items()})
            check_images(r)   # a ConservationError is a bug, never a record's fault: it stops the task
            try:
                texts = segments(r.text, text_count(r.meta))
            except Exception as exc:  # noqa: BLE001 - the on_error policy decides
                self.fail(r, exc)
                continue
            if len(r.payload["media"]) < self.min_images:
                # its images still count in the `interleaved` table: each removed one by its reason
                notes = self.stats.notes
                notes["images_listed"] += r.meta["images_listed"]
                for reason, n in r.meta.get("image_drops", {}).items():
                    notes[f"images_dropped:{reason}"] += n
                if r.payload["media"]:
                    notes["images_dropped:too_few_images"] += len(r.payload["media"])
                self.drop(r, "too_few_images", f"{len(r.payload['media'])} of {r.meta['images_listed']} image(s) left, "
                          f"min_images {self.min_images}; removed: " + ", ".join(
                              f"{n} {reason}" for reason, n in sorted(r.meta.get("image_drops", {}).items())))
                continue
            keep.append((r, texts))
        return keep

    def _sequence(self, record: Record, texts: list[str], codes: dict[str, np.ndarray]) -> np.ndarray:
        notes = self.stats.notes
        items = list(runs(record.meta["layout"], texts))
        strings = [v for kind, v in items if kind == "text"]
        encoded = iter(e.ids for e in self.vocab.tokenizer.encode_batch(strings, add_special_tokens=False))
        parts = []
        for kind, v in items:
            if kind == "text":
                parts.append(np.asarray(next(encoded), dtype=np.int32))
                notes["text_runs"] += 1
            else:
                c = codes.pop(f"{record.id}\x00{v}")
                parts.append(layout(c, self.vocab))
                notes["image_codes"] += int(c.size)
        parts.append(np.asarray([self.vocab.eod_id], dtype=np.int32))
        notes["documents"] += 1
        notes["images"] += len(record.payload["media"])
        notes["images_listed"] += record.meta["images_listed"]
        for reason, n in record.meta.get("image_drops", {}).items():
            notes[f"images_dropped:{reason}"] += n
        return np.concatenate(parts)

    def encode(self, records: list[Record]) -> Iterator[Record]:
        wall = time.perf_counter()
        docs = self._documents(records)
        items = [ImageItem(f"{r.id}\x00{j}", data, int(m["width"]), int(m["height"]), g)
                 for g, (r, _) in enumerate(docs) for j, (data, m) in enumerate(zip(r.payload["media"], r.meta["images"]))]
        written = 0
        for upto, codes, batches in encode_images(items, self.codec, area=self.area, batch_tokens=self.batch_tokens,
                                                  checkpoint=self.checkpoint, use_prefetch=self.prefetch,
                                                  timing=self.timing, window=self.window, planned=self.planned):
            self.stats.notes["batches"] += batches
            for r, texts in docs[written:upto]:
                r.shards = {"": [self._sequence(r, texts, codes)]}
                yield r
            written = upto
        for r, texts in docs[written:]:   # documents after the last one with images (min_images: 0)
            r.shards = {"": [self._sequence(r, texts, {})]}
            yield r
        self.timing["wall"] += time.perf_counter() - wall
