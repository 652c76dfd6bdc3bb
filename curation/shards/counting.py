"""Exact token counts of a shard by modality, read from its `.bin` in the vocabulary's block layout.

The `.bin` is read in blocks of `CHUNK` tokens (16 MB) with plain reads, never whole and not
memory-mapped (touched pages of a mapping count in the process's RSS): counting a source's merged
shard (3 GB per million web documents) holds one block, whatever the shard's size. The counts are
sums over blocks, so they equal counting the whole array at once (a test checks both ways).
"""
from __future__ import annotations

from pathlib import Path

import numpy as np

from curation.core.vocab import Block
from curation.errors import ConservationError
from curation.shards.indexed import CHUNK, iter_lengths, iter_tokens, read_header

IMAGE_MARKERS = {"image_start", "image_size_end", "end_of_row", "image_end", "end_of_frame"}
AUDIO_MARKERS = {"audio_start", "audio_end", "speech_to_text", "text_to_speech", "speech_translate", "speech_transcribe"}


def _kind(name: str) -> str:
    return "image" if name in IMAGE_MARKERS else "audio" if name in AUDIO_MARKERS else "text"


def count_block(tokens: np.ndarray, blocks: list[Block], reserved: dict[str, int]) -> dict[str, int]:
    """Token counts by modality of one array of ids (markers counted with their modality; reserved ids
    without a name count as text control tokens)."""
    counts = {"text": 0, "image": 0, "audio": 0}
    for block in blocks:
        inside = tokens[(tokens >= block.start) & (tokens < block.stop)]
        if block.name == "reserved":
            named = 0
            for name, off in reserved.items():
                m = int(np.count_nonzero(inside == block.start + off))
                counts[_kind(name)] += m
                named += m
            counts["text"] += int(inside.size) - named
        else:
            counts[block.name] += int(inside.size)
    return counts


def count_tokens_by_modality(prefix: Path, blocks: list[Block], reserved: dict[str, int], *,
                             chunk: int = CHUNK) -> dict[str, int]:
    """Exact token counts of a shard, read from `.bin` in blocks: text, image, audio (markers included),
    plus `documents` and `total`.

    `blocks` and `reserved` are the vocabulary layout (`Vocabulary.blocks`, `.reserved`)."""
    size = blocks[-1].stop
    dtype, n_seq, _ = read_header(Path(f"{prefix}.idx"))
    listed = sum(int(b.sum(dtype=np.int64)) for b in iter_lengths(Path(f"{prefix}.idx"), chunk))
    bin_path = Path(f"{prefix}.bin")
    held = bin_path.stat().st_size // dtype.itemsize if n_seq or bin_path.exists() else 0   # empty: no .bin
    if held != listed:
        raise ConservationError(f"{prefix}.bin holds {held} tokens but its .idx lists "
                                f"{listed}; the shard is damaged, re-run the merge")
    counts = {"text": 0, "image": 0, "audio": 0}
    for tokens in iter_tokens(prefix, chunk):
        if tokens.min() < 0 or tokens.max() >= size:
            raise ConservationError(f"{prefix}.bin has ids outside the vocabulary 0..{size - 1}")
        for k, n in count_block(tokens, blocks, reserved).items():
            counts[k] += n
    counts["documents"] = int(n_seq)
    counts["total"] = listed
    return counts
