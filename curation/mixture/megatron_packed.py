"""The packed Megatron-LM layout of a stage's sequences (`curation.mixture.sequences`): stock Megatron-LM
with `--train-samples P` draws each of the P sequences once, so every planned token exactly once.

megatron-core's GPTDataset shuffles the *documents* of a prefix, then cuts samples of `seq_length + 1`
tokens from the stream of shuffled documents, sample k starting at token k × seq_length (a sample's last
token is the next sample's first: it is a label once and an input once). Sequences written as separate
documents of `seq_length` tokens therefore line up with samples, but P of them yield only P - 1 samples
(the last has no label token), and the document Megatron shuffles last is never drawn. So the P
sequences are written back to back as *one* document of P × seq_length + 1 tokens: the one extra token
is padding (Megatron's eod, out of the loss with `--eod-mask-loss`). Megatron's document shuffle then
has nothing to reorder, one epoch holds exactly P samples (sample k = sequence k plus its label), and
its sample shuffle only changes the order in which the P sequences are drawn.

megatron-core stores a document's length as int32, so a stage of more than 2^31 - 2 tokens is split
into several such documents, each its own prefix (`packed-000`, `packed-001`, ...; nearly equal sizes,
each ending with the first token of the next): the blend weights are their sequence counts, and
`--train-samples` is their sum. The recipe's `shards.max_handoff_bytes` splits at a lower size; then each
prefix can be written on its own (`write_chunk`, a task per prefix: `curation.mixture.megatron.packed_prefix`),
with the bytes `write_packed` writes in one pass. Disk cost: the stage's tokens once (4 bytes each), plus under one
sequence of padding.
"""
from __future__ import annotations

import hashlib
import os
from collections.abc import Iterable, Iterator
from itertools import chain, islice
from pathlib import Path

import numpy as np

from curation.shards.indexed import index_parts

MAX_DOCUMENT_TOKENS = 2**31 - 1   # megatron-core's `sequence_lengths` are int32
DTYPE = np.dtype(np.int32)


def chunk_sizes(sequences: int, seq_length: int, max_tokens: int = MAX_DOCUMENT_TOKENS) -> list[int]:
    """Sequences per document: as few documents as fit `max_tokens` each (k × seq_length + 1), nearly equal."""
    if sequences <= 0:
        return []
    most = (max_tokens - 1) // seq_length
    if most < 1:
        raise ValueError(f"seq_length {seq_length} does not fit one Megatron document of {max_tokens} tokens")
    n = -(-sequences // most)
    return [sequences // n + (1 if j < sequences % n else 0) for j in range(n)]


def prefix_names(n: int) -> list[str]:
    return ["packed"] if n == 1 else [f"packed-{j:03d}" for j in range(n)]


def _write_sequences(sequences: Iterator, count: int, sink, held: dict[int, int]) -> int:
    """Up to `count` of `sequences` into `sink`, their planned tokens per source index added to `held`; returns
    how many there were."""
    written = 0
    for seq, counts in islice(sequences, count):
        sink.write(np.ascontiguousarray(seq, dtype=DTYPE).tobytes())
        for i, n in counts.items():
            held[i] = held.get(i, 0) + n
        written += 1
    return written


def _first_token(seq: np.ndarray) -> bytes:
    """The extra token that ends a prefix: the next prefix's first."""
    return np.ascontiguousarray(seq[:1], dtype=DTYPE).tobytes()


def layout(sequences: Iterable[tuple[np.ndarray, dict[int, int]]], sizes: list[int], pad: int,
           sinks: list) -> dict[int, int]:
    """Write the sequences, `sizes[j]` of them to `sinks[j]` (anything with `.write(bytes)`), each document
    followed by its one extra token; returns the planned tokens per source index written. The single
    layout code path for writing (files) and checking (hashes)."""
    it, held, written, after = iter(sequences), {}, 0, None
    for j, (size, sink) in enumerate(zip(sizes, sinks)):
        written += _write_sequences(it if after is None else chain([after], it), size, sink, held)
        after = next(it, None)
        if after is not None and j < len(sizes) - 1:   # the document ends with the next one's first token
            sink.write(_first_token(after[0]))
    if after is not None:
        raise ValueError(f"the stage has more sequences than the {sum(sizes)} its plan gives; re-run `curate run`")
    if written != sum(sizes):
        raise ValueError(f"the stage has {written} sequences, its plan gives {sum(sizes)}; re-run `curate run`")
    if sizes:
        sinks[-1].write(np.asarray([pad], dtype=DTYPE).tobytes())
    return held


def index_bytes(size: int, seq_length: int) -> Iterator[bytes]:
    """The `.idx` of one packed document of `size` sequences."""
    for part in index_parts(np.asarray([size * seq_length + 1], np.int32), DTYPE):
        yield part if isinstance(part, bytes) else part.tobytes()


def _write_index(hdir: Path, name: str, size: int, seq_length: int) -> None:
    tmp = hdir / f"{name}.idx.tmp"
    tmp.write_bytes(b"".join(index_bytes(size, seq_length)))
    os.replace(tmp, hdir / f"{name}.idx")


class _File:
    """A `.bin` being written, hashed as it is written (the manifest's sha256 without reading it again)."""

    def __init__(self, path: Path):
        self.tmp = Path(f"{path}.tmp")
        self.path, self.f, self.h = path, open(self.tmp, "wb"), hashlib.sha256()

    def write(self, b: bytes) -> None:
        self.f.write(b)
        self.h.update(b)

    def close(self) -> None:
        self.f.close()
        os.replace(self.tmp, self.path)


def write_packed(hdir: Path, sequences: Iterable, sizes: list[int], seq_length: int,
                 pad: int) -> tuple[list[dict], dict[int, int]]:
    """Write the packed prefixes into `hdir`, `sizes[j]` sequences in the j-th (`chunk_sizes`); returns (per
    prefix: name, sequences, tokens, the sha256 of its `.bin`; planned tokens per source index)."""
    names = prefix_names(len(sizes))
    sinks = [_File(hdir / f"{n}.bin") for n in names]
    try:
        held = layout(sequences, sizes, pad, sinks)
    except BaseException:
        for s in sinks:
            s.f.close()
            s.tmp.unlink(missing_ok=True)
        raise
    for name, size, sink in zip(names, sizes, sinks):
        sink.close()
        _write_index(hdir, name, size, seq_length)
    return [{"name": n, "sequences": k, "tokens": k * seq_length + 1, "bin_sha256": sink.h.hexdigest()}
            for n, k, sink in zip(names, sizes, sinks)], held


def write_chunk(hdir: Path, name: str, sequences: Iterable, size: int, seq_length: int, pad: int,
                last: bool) -> dict:
    """One packed prefix by itself, as `write_packed` writes it among the others: the first `size` of
    `sequences`, then the first token of the next one (the last prefix: `pad`, and no sequence may follow).
    Returns what `write_packed` gives per prefix, with `held`, the planned tokens per source index in it."""
    it = iter(sequences)
    sink = _File(hdir / f"{name}.bin")
    held: dict[int, int] = {}
    try:
        written = _write_sequences(it, size, sink, held)
        after = next(it, None)
        if written < size or (after is None) != last:
            raise ValueError(f"packed prefix {name}: the stage has {'more' if written == size and last else 'fewer'} "
                             f"sequences than the plan gives; re-run `curate run`")
        sink.write(np.asarray([pad], dtype=DTYPE).tobytes() if after is None else _first_token(after[0]))
    except BaseException:
        sink.f.close()
        sink.tmp.unlink(missing_ok=True)
        raise
    sink.close()
    _write_index(hdir, name, size, seq_length)
    return {"name": name, "sequences": size, "tokens": size * seq_length + 1, "bin_sha256": sink.h.hexdigest(),
            "held": held}


class _Hash:
    def __init__(self):
        self.h = hashlib.sha256()

    def write(self, b: bytes) -> None:
        self.h.update(b)


def expected_digests(sequences: Iterable, sizes: list[int], seq_length: int,
                     pad: int) -> tuple[dict[str, tuple[str, str]], dict[int, int]]:
    """What `write_packed` writes, as sha256 of each prefix's (.bin, .idx), without writing it."""
    sinks = [_Hash() for _ in sizes]
    held = layout(sequences, sizes, pad, sinks)
    idx = {n: hashlib.sha256(b"".join(index_bytes(k, seq_length))).hexdigest()
           for n, k in zip(prefix_names(len(sizes)), sizes)}
    return {n: (s.h.hexdigest(), idx[n]) for n, s in zip(prefix_names(len(sizes)), sinks)}, held
