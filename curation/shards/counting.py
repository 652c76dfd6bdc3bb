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
    without a name count as text control tokens).

    A block's count is the ids below its stop less those below its start: one comparison pass per block edge,
    no gathered copy of the ids (a merge counts every token of a source this way, tests/benchmarks/bench_counting.py);
    only the reserved block's few ids are gathered, and counted per id at once."""
    below: dict[int, int] = {}

    def lt(edge: int) -> int:
        if edge not in below:
            below[edge] = int(np.count_nonzero(tokens < edge))
        return below[edge]

    counts = {"text": 0, "image": 0, "audio": 0}
    for block in blocks:
        n = lt(block.stop) - lt(block.start)
        if block.name != "reserved":
            counts[block.name] += n
            continue
        counts["text"] += n
        if n and reserved:
            inside = tokens[(tokens >= block.start) & (tokens < block.stop)] - block.start
            per_id = np.bincount(inside, minlength=max(reserved.values()) + 1)
            for name, off in reserved.items():
                counts[_kind(name)] += int(per_id[off])
                counts["text"] -= int(per_id[off])
    return counts


class TokenCounter:
    """Counts by modality over blocks of token ids, fed in turn (`add`), checking every id is in the vocabulary."""

    def __init__(self, blocks: list[Block], reserved: dict[str, int], where: str):
        self.blocks, self.reserved, self.where = blocks, reserved, where
        self.size = blocks[-1].stop
        self.counts = {"text": 0, "image": 0, "audio": 0}
        self.held = 0

    def add(self, tokens: np.ndarray) -> None:
        if not tokens.size:
            return
        if tokens.min() < 0 or tokens.max() >= self.size:
            raise ConservationError(f"{self.where} has ids outside the vocabulary 0..{self.size - 1}")
        for k, n in count_block(tokens, self.blocks, self.reserved).items():
            self.counts[k] += n
        self.held += int(tokens.size)

    def result(self, prefix: Path, chunk: int = CHUNK) -> dict[str, int]:
        """The counts, `documents` and `total` of the shard at `prefix` whose tokens were all added; its `.idx`
        must list exactly the tokens held."""
        _, n_seq, _ = read_header(Path(f"{prefix}.idx"))
        listed = sum(int(b.sum(dtype=np.int64)) for b in iter_lengths(Path(f"{prefix}.idx"), chunk))
        if self.held != listed:
            raise ConservationError(f"{prefix}.bin holds {self.held} tokens but its .idx lists "
                                    f"{listed}; the shard is damaged, re-run the merge")
        return {**self.counts, "documents": int(n_seq), "total": listed}


def count_tokens_by_modality(prefix: Path, blocks: list[Block], reserved: dict[str, int], *,
                             chunk: int = CHUNK) -> dict[str, int]:
    """Exact token counts of a shard, read from `.bin` in blocks: text, image, audio (markers included),
    plus `documents` and `total`.

    `blocks` and `reserved` are the vocabulary layout (`Vocabulary.blocks`, `.reserved`)."""
    dtype, n_seq, _ = read_header(Path(f"{prefix}.idx"))
    bin_path = Path(f"{prefix}.bin")
    held = bin_path.stat().st_size // dtype.itemsize if n_seq or bin_path.exists() else 0   # empty: no .bin
    listed = sum(int(b.sum(dtype=np.int64)) for b in iter_lengths(Path(f"{prefix}.idx"), chunk))
    if held != listed:   # before reading any block: a damaged shard fails fast
        raise ConservationError(f"{prefix}.bin holds {held} tokens but its .idx lists "
                                f"{listed}; the shard is damaged, re-run the merge")
    counter = TokenCounter(blocks, reserved, str(bin_path))
    for tokens in iter_tokens(prefix, chunk):
        counter.add(tokens)
    return counter.result(prefix, chunk)
