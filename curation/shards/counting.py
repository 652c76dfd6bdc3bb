"""Exact token counts of a shard by modality, read from its `.bin` in the vocabulary's block layout."""
from __future__ import annotations

from pathlib import Path

import numpy as np

from curation.core.vocab import Block
from curation.errors import ConservationError
from curation.shards.indexed import read_index

IMAGE_MARKERS = {"image_start", "image_size_end", "end_of_row", "image_end", "end_of_frame"}
AUDIO_MARKERS = {"audio_start", "audio_end", "speech_to_text", "text_to_speech", "speech_translate"}


def count_tokens_by_modality(prefix: Path, blocks: list[Block], reserved: dict[str, int]) -> dict[str, int]:
    """Exact token counts of a shard, read from `.bin`: text, image, audio (markers included).

    `blocks` and `reserved` are the vocabulary layout (`Vocabulary.blocks`, `.reserved`)."""
    size = blocks[-1].stop
    _, lengths, _, _ = read_index(Path(f"{prefix}.idx"))
    tokens = np.fromfile(f"{prefix}.bin", dtype=np.int32)
    if tokens.size != int(lengths.sum()):
        raise ConservationError(f"{prefix}.bin holds {tokens.size} tokens but its .idx lists "
                                f"{int(lengths.sum())}; the shard is damaged, re-run the merge")
    if tokens.size and (tokens.min() < 0 or tokens.max() >= size):
        raise ConservationError(f"{prefix}.bin has ids outside the vocabulary 0..{size - 1}")
    counts = {"text": 0, "image": 0, "audio": 0}
    for block in blocks:
        n = int(np.count_nonzero((tokens >= block.start) & (tokens < block.stop)))
        if block.name == "reserved":
            ids = tokens[(tokens >= block.start) & (tokens < block.stop)]
            for name, off in reserved.items():
                m = int(np.count_nonzero(ids == block.start + off))
                counts["image" if name in IMAGE_MARKERS else "audio" if name in AUDIO_MARKERS else "text"] += m
                n -= m
            counts["text"] += n  # unnamed reserved ids count as text control tokens
        else:
            counts[block.name] += n
    counts["documents"] = int(lengths.size)
    counts["total"] = int(tokens.size)
    return counts
