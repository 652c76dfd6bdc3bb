"""Indexed datasets merged: a source's tokenize parts concatenated in order into one indexed dataset (`merge`), or
into parts of at most a size (`split_merge`, `plan_cuts`), streaming blocks of tokens and lengths, hashing and
counting the bytes as they pass (the merge task's marker needs nothing read again); and the digests of the
set as one prefix (`index_sha256`, the whole set's `.bin` sha256), whatever the part size."""
from __future__ import annotations

import hashlib
import os
import struct
from collections import deque
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import NamedTuple

import numpy as np

from curation.core.faults import named
from curation.shards.indexed import CHUNK, DTYPE_CODES, MAGIC, VERSION, iter_lengths, read_header


def merge(parts: list[Path], prefix: Path, *, chunk: int = CHUNK, tokens=None, hashes: dict | None = None) -> int:
    """Concatenate indexed datasets (given by prefix, in order) into one, atomically and streaming: tokens
    are copied in 4 MB blocks and the index is written from each part's lengths in turn, so memory does
    not grow with the number of documents (`chunk` lengths at a time). The bytes are those `write_index`
    writes for all the lengths at once.

    An empty result (no sequences) writes its `.idx` only: a 0-byte `.bin` is a file that megatron-core
    cannot map (`cannot mmap an empty file`), so no such file is left where a trainer could open it
    (`has_tokens` tells the two apart). Returns the number of sequences written.

    While the bytes pass through, `tokens` (a callable) is given each block of token ids, and `hashes` (a
    dict) receives the sha256 of the files written (`.bin`, `.idx`): what the ledger and manifests need of
    the merged shard is computed by the task that writes it, not by reading it again on the driver."""
    dtype, counts = _headers(parts, prefix)
    n_seq = sum(counts)
    _write_range(parts, counts, prefix, dtype, (0, n_seq), (0, None), chunk, tokens, hashes)
    return n_seq


EMPTY_SHA256 = hashlib.sha256().hexdigest()   # an empty set's `.bin`: no file, no bytes
PART = ".part-"   # a split shard set's k-th part is `<prefix>.part-<k:05d>` (`split_merge`)


def part_name(prefix: Path, k: int) -> Path:
    return Path(f"{prefix}{PART}{k:05d}")


class PartJob(NamedTuple):
    """One part of a split merge: written to `target`, documents `docs` of the inputs' concatenation, whose
    tokens are its `.bin` bytes `span` (end None: to the end)."""
    target: Path
    docs: tuple[int, int]
    span: tuple[int, int | None]


def plan_split(parts: list[Path], prefix: Path, max_bytes: int,
               chunk: int = CHUNK) -> tuple[np.dtype, list[int], list[PartJob]]:
    """(token type, documents per input, the parts to write) of `split_merge`: one part keeps `prefix`, several
    are `part_name(prefix, k)`. Each part can be written on its own (`write_part`), in any order, anywhere that
    sees the inputs."""
    dtype, counts = _headers(parts, prefix)
    cuts = plan_cuts(parts, dtype, max_bytes, chunk)
    if len(cuts) == 1:
        return dtype, counts, [PartJob(Path(prefix), (0, cuts[0][0]), (0, None))]
    jobs, doc, byte = [], 0, 0
    for k, (docs, nbytes) in enumerate(cuts):
        jobs.append(PartJob(part_name(prefix, k), (doc, doc + docs), (byte, byte + nbytes)))
        doc, byte = doc + docs, byte + nbytes
    return dtype, counts, jobs


def write_part(parts: list[Path], counts: list[int], dtype: np.dtype, job: PartJob, *, chunk: int = CHUNK,
               tokens=None, whole=None) -> dict:
    """Write one part of `plan_split`; returns the sha256 of its files (`.idx`, and `.bin` when it has
    documents). `tokens` is given each block of its ids; `whole`, a sha256 object, is fed its `.bin` bytes."""
    hashes: dict = {}
    _write_range(parts, counts, job.target, dtype, job.docs, job.span, chunk, tokens, hashes, whole)
    return hashes


def write_parts(parts: list[Path], counts: list[int], dtype: np.dtype, jobs: list[PartJob], *, chunk: int = CHUNK,
                tokens=None) -> tuple[list[dict], tuple[str, str]]:
    """Write the parts of `plan_split` here, one after the other: the sha256 of each part's files, and the
    unsplit digests (`.bin`, `.idx`) fed by the same pass. `tokens(prefix)` gives the callable fed each block of
    that part's ids."""
    whole_bin = hashlib.sha256() if len(jobs) > 1 else None   # one part: its own digest is the whole set's
    hashes = [write_part(parts, counts, dtype, job, chunk=chunk, tokens=tokens(job.target) if tokens else None,
                         whole=whole_bin) for job in jobs]
    if whole_bin is None:
        return hashes, (hashes[0].get(".bin", EMPTY_SHA256), hashes[0][".idx"])
    return hashes, (whole_bin.hexdigest(), index_sha256(parts, chunk))


def split_merge(parts: list[Path], prefix: Path, max_bytes: int, *, chunk: int = CHUNK, tokens=None,
                whole: dict | None = None) -> list[tuple[Path, int, dict]]:
    """`merge` into parts of at most `max_bytes` of `.bin` each, cut between documents (a document larger than
    `max_bytes` is a part of its own): each part a valid indexed dataset, their documents in order those of
    `merge`. One part keeps `prefix` (the bytes `merge` writes); several are `part_name(prefix, k)`. Returns
    (prefix, sequences, sha256 of its files) per part; `tokens(prefix)` gives the callable fed each block of
    that part's ids. `whole` receives the sha256 that `merge`'s `.bin` and `.idx` would have (`.bin`, `.idx`),
    so what identifies the documents does not depend on the part size. The parts are written here, one after
    the other; `plan_split` and `write_part` let a caller spread them (`curation.runtime.merge`)."""
    dtype, counts, jobs = plan_split(parts, prefix, max_bytes, chunk)
    hashes, digests = write_parts(parts, counts, dtype, jobs, chunk=chunk, tokens=tokens)
    if whole is not None:
        whole[".bin"], whole[".idx"] = digests
    return [(job.target, job.docs[1] - job.docs[0], h) for job, h in zip(jobs, hashes)]


def unsplit_digests(parts: list[Path], chunk: int = CHUNK) -> tuple[str, str]:
    """The sha256 of the `.bin` and `.idx` that `merge` would write for these inputs, read from them without
    writing anything (what `split_merge` puts in `whole` when its parts are written elsewhere)."""
    h = hashlib.sha256()
    for block in _bin_blocks(parts, 0, None):
        h.update(block)
    return h.hexdigest(), index_sha256(parts, chunk)


def plan_cuts(parts: list[Path], dtype: np.dtype, max_bytes: int, chunk: int = CHUNK) -> list[tuple[int, int]]:
    """(documents, `.bin` bytes) of each part, greedily: as many whole documents as fit `max_bytes`, at least
    one. An empty input is one empty part. Reads the lengths in blocks (a cut is a search, not a loop)."""
    if max_bytes < 1:
        raise ValueError(f"part size {max_bytes} bytes: it must be at least 1")
    cuts: list[tuple[int, int]] = []
    docs = nbytes = 0
    for part in parts:
        for block in iter_lengths(Path(f"{part}.idx"), chunk):
            cum = np.cumsum(block, dtype=np.int64) * dtype.itemsize
            i, before = 0, 0
            while i < block.size:
                j = int(np.searchsorted(cum, before + max_bytes - nbytes, side="right"))
                if j == i and not docs:
                    j = i + 1                       # a document larger than a part: a part of its own
                if j > i:
                    docs, nbytes = docs + j - i, nbytes + int(cum[j - 1]) - before
                    before, i = int(cum[j - 1]), j
                if i < block.size:
                    cuts.append((docs, nbytes))
                    docs = nbytes = 0
    if docs or not cuts:
        cuts.append((docs, nbytes))
    return cuts


def _headers(parts: list[Path], prefix: Path) -> tuple[np.dtype, list[int]]:
    headers = [read_header(Path(f"{part}.idx")) for part in parts]
    dtypes = {h[0] for h in headers}
    if len(dtypes) > 1:
        raise ValueError(f"cannot merge {prefix}: its parts mix token types {sorted(map(str, dtypes))}")
    return (dtypes.pop() if dtypes else np.dtype(np.int32)), [h[1] for h in headers]


def lengths_between(parts: list[Path], counts: list[int], start: int, stop: int,
                    chunk: int = CHUNK) -> Iterator[np.ndarray]:
    """The lengths of documents [start, stop) of the parts' concatenation, in non-empty blocks."""
    first = 0
    for part, n in zip(parts, counts):
        if first < stop and first + n > start:
            yield from iter_lengths(Path(f"{part}.idx"), chunk, max(start - first, 0), min(stop - first, n))
        first += n


def index_blocks(blocks, dtype: np.dtype, n_seq: int, chunk: int = CHUNK) -> Iterator[bytes]:
    """The bytes of the `.idx` of `n_seq` sequences whose lengths `blocks()` yields (called twice)."""
    yield MAGIC + struct.pack("<QBQQ", VERSION, DTYPE_CODES[dtype], n_seq, n_seq + 1)
    for block in blocks():
        yield block.tobytes()
    pointer = 0
    for block in blocks():   # the byte offset of each sequence: the bytes of all earlier ones
        ends = np.cumsum(block, dtype=np.int64) * dtype.itemsize + pointer
        yield (ends - block.astype(np.int64) * dtype.itemsize).tobytes()
        pointer = int(ends[-1])
    for start in range(0, n_seq + 1, chunk):
        yield np.arange(start, min(start + chunk, n_seq + 1), dtype=np.int64).tobytes()


def index_sha256(prefixes: list[Path], chunk: int = CHUNK) -> str:
    """The sha256 of the `.idx` that `merge` writes for these indexed datasets, without writing it."""
    dtype, counts = _headers(prefixes, Path("?"))
    n = sum(counts)
    h = hashlib.sha256()
    for b in index_blocks(lambda: lengths_between(prefixes, counts, 0, n, chunk), dtype, n, chunk):
        h.update(b)
    return h.hexdigest()


def _write_range(parts: list[Path], counts: list[int], prefix: Path, dtype: np.dtype, docs: tuple[int, int],
                 span: tuple[int, int | None], chunk: int, tokens, hashes: dict | None, whole=None) -> None:
    """Documents `docs` of the parts' concatenation, whose tokens are its `.bin` bytes `span` (end None: to the
    end), as one indexed dataset at `prefix`."""
    Path(prefix).parent.mkdir(parents=True, exist_ok=True)
    n_seq = docs[1] - docs[0]
    bin_tmp, idx_tmp = Path(f"{prefix}.bin.tmp"), Path(f"{prefix}.idx.tmp")
    bin_hash, idx_hash = hashlib.sha256(), hashlib.sha256()
    with named(bin_tmp), open(bin_tmp, "wb") as out, \
            _Digests([h for h in (bin_hash if hashes is not None else None, whole) if h is not None]) as digests:
        for block in _bin_blocks(parts, *span):
            digests.update(block)
            out.write(block)
            if tokens is not None:
                tokens(np.frombuffer(block, dtype=dtype))
    with named(idx_tmp), open(idx_tmp, "wb") as f:
        for b in index_blocks(lambda: lengths_between(parts, counts, *docs, chunk), dtype, n_seq, chunk):
            f.write(b)
            idx_hash.update(b)
    os.replace(idx_tmp, f"{prefix}.idx")
    if hashes is not None:
        hashes[".idx"] = idx_hash.hexdigest()
        if n_seq:
            hashes[".bin"] = bin_hash.hexdigest()
    if n_seq:
        os.replace(bin_tmp, f"{prefix}.bin")
    else:
        bin_tmp.unlink()
        Path(f"{prefix}.bin").unlink(missing_ok=True)   # an earlier run's empty file


def _bin_blocks(parts: list[Path], start: int, end: int | None) -> Iterator[bytes]:
    """Bytes [start, end) of the parts' `.bin` files back to back (end None: all), in blocks of at most 4 MB
    (offsets are whole ids, and 4 MB a multiple of every token size: blocks hold whole ids)."""
    at = 0
    for part in parts:
        path = f"{part}.bin"
        size = os.path.getsize(path)
        if end is not None and (at >= end or at + size <= start):
            at += size
            continue
        with open(path, "rb") as f:
            f.seek(max(start - at, 0))
            left = (min(end, at + size) - max(start, at)) if end is not None else None
            while left is None or left > 0:
                block = f.read(1 << 22 if left is None else min(1 << 22, left))
                if not block:
                    break
                yield block
                if left is not None:
                    left -= len(block)
        at += size


class _Digests:
    """sha256 objects fed the same blocks, in order, on a thread of their own: hashlib releases the GIL for a
    block, so hashing overlaps the caller's reads, writes and token counts (a merge hashes each part, and the
    bytes of a set of several parts once more for the whole set's digest). At most `ahead` blocks wait; leaving
    the `with` waits for all."""

    def __init__(self, hashes: list, ahead: int = 4):
        self.hashes, self.ahead, self.pending = hashes, ahead, deque()
        self.pool = ThreadPoolExecutor(1, thread_name_prefix="sha256") if hashes else None

    def _update(self, block: bytes) -> None:
        for h in self.hashes:
            h.update(block)

    def update(self, block: bytes) -> None:
        if self.pool is None:
            return
        if len(self.pending) >= self.ahead:
            self.pending.popleft().result()
        self.pending.append(self.pool.submit(self._update, block))

    def __enter__(self) -> _Digests:
        return self

    def __exit__(self, *exc) -> None:
        if self.pool is not None:
            try:
                while self.pending:
                    self.pending.popleft().result()
            finally:
                self.pool.shutdown(wait=True, cancel_futures=True)
