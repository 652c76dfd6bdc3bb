"""The tokenize step of a conversation source that expands its media (`input.conversations.expand_media`).

Conversations are rendered in the chat template as the text tokenizer renders them
(`TextTokenizer.render_conversation`), then each media placeholder is replaced by its item's token block
(`curation.steps.conversation.chat.expand_placeholders`):

    image: image_start "H*W" image_size_end codes end_of_row ... codes image_end   (`image.codec.layout`)
    audio: audio_start codes audio_end                                               (`audio_tokens`)

Images go through the image encoder's machinery (`curation.steps.image.batches`: the batch plan,
prefetching loader, codec, one checkpoint per batch), resized to `images.area`; clips are encoded one
per batch with the audio codec (peak-normalised to -3 dBFS, as the audio tokenizer does; a clip alone
in its batch has no padding, so every one of its ceil(samples/600) codes is kept), and checkpointed
after the images' batches. A conversation whose placeholders and media do not pair up, kind by kind,
is quarantined (`placeholder_mismatch`). The copy without reasoning (`reasoning:`) is expanded with the
same blocks. Documents and conversations without media are tokenized exactly as the text tokenizer does,
and every record is written in shard order. The codecs load only when a source expands media, so a
text-only run never imports torch.
"""
from __future__ import annotations

import io
import time
from collections.abc import Iterator

import numpy as np
import torch

from curation.core.layout import NO_REASONING
from curation.core.record import Drop, Record
from curation.steps.audio.ingest import load_clip, peak_normalise
from curation.steps.audio.interleave import audio_tokens
from curation.steps.base import ShardStep
from curation.steps.conversation.chat import expand_placeholders
from curation.steps.conversation.turns import is_conversation
from curation.steps.encode import BatchCodes
from curation.steps.image.batches import ImageItem, batch_count, encode_images
from curation.steps.image.codec import layout
from curation.steps.text.tokenize import TextTokenizer


class ConversationMediaTokenizer(ShardStep):
    name = "tokenize"

    def __init__(self, text: TextTokenizer, *, image_codec=None, audio_codec=None, area: int = 65536,
                 batch_tokens: int = 16384, checkpoint: BatchCodes | None = None, prefetch: bool = True, **kw):
        super().__init__(**kw)
        self.text, self.vocab = text, text.vocab
        self.image_codec, self.audio_codec = image_codec, audio_codec
        self.area, self.batch_tokens, self.checkpoint, self.prefetch = area, batch_tokens, checkpoint, prefetch
        self.timing = {"load": 0.0, "encode": 0.0, "wall": 0.0}
        self.planned: list[list[int]] = []   # [tokens, images] per planned image batch (the rank plan)

    def _with_media(self, r: Record) -> bool:
        return is_conversation(r) and bool(r.meta.get("media"))

    def _codes(self, records: list[Record]) -> dict[str, np.ndarray]:
        """Codes of every media item of the shard, by `<record id>\\0<item>`."""
        images, clips = [], []
        for g, r in enumerate(records):
            for i, (item, data) in enumerate(zip(r.meta["media"], r.payload.get("media") or [])):
                key = f"{r.id}\x00{i}"
                if item["kind"] == "image":
                    images.append(ImageItem(key, data, int(item["width"]), int(item["height"]), g))
                else:
                    clips.append((key, data))
        codes: dict[str, np.ndarray] = {}
        if images:
            if self.image_codec is None:
                raise ValueError("conversation images to expand but no image codec was loaded")
            for _, done, n in encode_images(images, self.image_codec, area=self.area, batch_tokens=self.batch_tokens,
                                            checkpoint=self.checkpoint, use_prefetch=self.prefetch, timing=self.timing,
                                            planned=self.planned):
                codes.update(done)
                self.stats.notes["batches"] += n
        first = batch_count(images, self.image_codec, area=self.area, batch_tokens=self.batch_tokens) if images else 0
        for k, (key, data) in enumerate(clips):
            if self.audio_codec is None:
                raise ValueError("conversation clips to expand but no audio codec was loaded")
            got = self.checkpoint.load(first + k, [key]) if self.checkpoint is not None else None
            if got is None:
                start = time.perf_counter()
                wave = peak_normalise(load_clip(io.BytesIO(data)))
                got = [self.audio_codec.encode(torch.from_numpy(wave)[None]).numpy()[0]]
                self.timing["encode"] += time.perf_counter() - start
                if self.checkpoint is not None:
                    self.checkpoint.save(first + k, [key], got)
            codes[key] = got[0]
            self.stats.notes["batches"] += 1
        return codes

    def _expanded(self, r: Record, codes: dict[str, np.ndarray]) -> Record:
        blocks = []
        for i, item in enumerate(r.meta["media"]):
            c = codes[f"{r.id}\x00{i}"]
            blocks.append(layout(c, self.vocab) if item["kind"] == "image" else audio_tokens(c, self.vocab))
            self.stats.notes[f"{item['kind']}s"] += 1
            self.stats.notes[f"{item['kind']}_codes"] += int(c.size)
        rendered = self.text.render_conversation(r)
        r.shards = {"": [expand_placeholders(rendered.tokens, rendered.placeholders, blocks, self.text.chat_markers)]}
        if self.text.stripper is not None:
            chat = r.meta.get("chat") or {}
            if any(it[0] == "think_open" for _, items in chat.get("turns", []) for it in items):
                bare = self.text.render_conversation(r, thinking=False)
                r.shards[NO_REASONING] = [expand_placeholders(bare.tokens, bare.placeholders, blocks,
                                                              self.text.chat_markers)]
            else:
                r.shards[NO_REASONING] = r.shards[""]
        return r

    def _settle_one(self, r: Record, result) -> Record | None:
        if isinstance(result, Exception):
            self.fail(r, result)
        elif isinstance(result, Drop):
            self.drop(r, result.reason)
        else:
            return result
        return None

    def encode(self, records: list[Record]) -> Iterator[Record]:
        wall = time.perf_counter()
        media = [r for r in records if self._with_media(r)]
        codes = self._codes(media)
        plain = {id(r): res for batch in range(0, len(records), self.text.batch_size)
                 for r, res in self._plain(records[batch:batch + self.text.batch_size])}
        for r in records:
            if id(r) in plain:
                result = plain[id(r)]
            else:
                try:
                    result = self._expanded(r, codes)
                except Exception as exc:  # noqa: BLE001 - quarantined with its reason
                    result = exc
            kept = self._settle_one(r, result)
            if kept is not None:
                yield kept
        self.timing["wall"] += time.perf_counter() - wall

    def _plain(self, batch: list[Record]):
        """(record, result) of the batch's records without media, tokenized by the text tokenizer."""
        rest = [r for r in batch if not self._with_media(r)]
        return zip(rest, self.text.handle(rest)) if rest else ()
