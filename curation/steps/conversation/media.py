"""The media of conversations, resolved and checked in the process phase so that the tokenize step can
expand their placeholders (`input.conversations.expand_media`; `curation.steps.conversation.media_tokenize`).

Every item of `meta["media"]` (`{"kind", "ref"}`, in placeholder order; `curation.steps.conversation.turns`) is
read by `curation.steps.conversation.media_refs.load_reference`: a `data:` URL (inline bytes, base64 parts), or
a path under the media root (`conversations.media_root`, relative to the input file's folder; paths may
not leave it). URLs are refused: nothing is downloaded at run time. An image is decoded and validated
as an image sample is (`curation.steps.image.decode`; shorter than `images.min_side`:
`image_too_small`); a clip is decoded, mixed to mono and resampled to 24 kHz, checked against
`audio.max_seconds`, and kept as FLAC. The bytes travel with the record (`record.payload["media"]`, the processed
column `media`), the sizes and durations in `meta["media"]`.

A conversation is a whole: a placeholder without its media cannot be trained on, so any media item that
fails quarantines the conversation with the item's reason (`missing_media`, `bad_media`, `corrupt_image`,
`truncated_image`, `empty_image`, `decompression_bomb`, `image_too_small`, `undecodable_audio`,
`empty_audio`, `too_long`, or `unexpanded_media` for a kind the source does not expand).
"""
from __future__ import annotations

import io
from pathlib import Path

from curation.core.record import Record
from curation.errors import RecordError
from curation.steps.base import Step
from curation.steps.conversation.media_refs import load_reference


class ConversationMedia(Step):
    name = "conversation_media"

    def __init__(self, *, kinds: list[str], root: Path, min_side: int, max_seconds: float, **kw):
        super().__init__(**kw)
        self.kinds, self.root, self.min_side, self.max_seconds = set(kinds), Path(root), min_side, max_seconds

    def _image(self, data: bytes, item: dict) -> bytes:
        from curation.steps.image.decode import decode
        img = decode(data)
        if min(img.size) < self.min_side:
            raise RecordError("image_too_small", f"{img.width}×{img.height} pixels, min_side {self.min_side}")
        item.update(width=img.width, height=img.height)
        return data

    def _audio(self, data: bytes, item: dict) -> bytes:
        from curation.steps.audio.ingest import SAMPLE_RATE, flac_bytes, load_clip
        wave = load_clip(io.BytesIO(data))
        if wave.size == 0:
            raise RecordError("empty_audio", "no samples")
        seconds = wave.size / SAMPLE_RATE
        if seconds > self.max_seconds:
            raise RecordError("too_long", f"{seconds:.1f} s > max_seconds {self.max_seconds}")
        item.update(seconds=round(seconds, 4), samples=int(wave.size))
        return flac_bytes(wave)   # 24 kHz mono: what the codec takes, decoded once

    def process(self, record: Record) -> Record:
        media = record.meta.get("media") or []
        blobs = []
        for i, item in enumerate(media):
            kind = item["kind"]
            if kind not in self.kinds:
                raise RecordError("unexpanded_media", f"media item {i} is {kind!r}; this source expands "
                                  f"{sorted(self.kinds)} (input.conversations.expand_media)")
            if not item.get("ref"):
                raise RecordError("missing_media", f"media item {i} ({kind}) has no reference")
            try:
                data = load_reference(item["ref"], self.root)
                blobs.append(self._image(data, item) if kind == "image" else self._audio(data, item))
            except RecordError as e:
                raise RecordError(e.reason, f"media item {i} ({kind}, {item['ref'][:120]!r}): {e.detail}") from None
        record.payload["media"] = blobs or None
        return record
