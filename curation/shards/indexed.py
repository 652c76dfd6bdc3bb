"""Megatron indexed datasets (`.bin` + `.idx`), written and merged without megatron-core.

Byte layout (all little-endian), as read by `megatron.core.datasets.indexed_dataset.IndexedDataset`:

    PREFIX.bin   the token ids of all sequences back to back, dtype int32 (4 bytes per token)
    PREFIX.idx   b"MMIDIDX\\x00\\x00"      9 bytes   magic
                 <Q version = 1           8 bytes
                 <B dtype code = 4        1 byte    (4 = int32; 8 = uint16)
                 <Q S = sequence count    8 bytes
                 <Q D = document count+1  8 bytes
                 int32[S]  sequence lengths in tokens
                 int64[S]  byte offset of each sequence in .bin
                 int64[D]  document boundaries as sequence indices: [0, ..., S]

Here one document is one sequence (text documents end with the EOD token), so the
document index is simply 0..S. Writers stream tokens to `<path>.tmp` files and rename both
files into place only in `close()`, so a crash never leaves a half-written shard that looks
complete. Tests read these files back with megatron-core itself.
"""
from __future__ import annotations

import hashlib
import os
import struct
from collections import deque
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np

from curation.core.faults import named

MAGIC = b"MMIDIDX\x00\x00"
VERSION = 1
DTYPE_CODES = {np.dtype(np.int32): 4, np.dtype(np.uint16): 8}
CODE_DTYPES = {v: k for k, v in DTYPE_CODES.items()}


class IndexedWriter:
    def __init__(self, prefix: Path, dtype=np.int32):
        self.prefix = Path(prefix)
        self.prefix.parent.mkdir(parents=True, exist_ok=True)
        self.dtype = np.dtype(dtype)
        self._bin_tmp = Path(f"{prefix}.bin.tmp")
        self._bin = open(self._bin_tmp, "wb")
        self.lengths: list[int] = []

    def add(self, tokens: np.ndarray) -> None:
        arr = np.ascontiguousarray(tokens, dtype=self.dtype)
        with named(self._bin_tmp):
            self._bin.write(arr.tobytes())
        self.lengths.append(int(arr.size))

    def close(self) -> None:
        with named(self._bin_tmp):
            self._bin.close()
        write_index(Path(f"{self.prefix}.idx"), np.asarray(self.lengths, dtype=np.int32), self.dtype)
        os.replace(self._bin_tmp, f"{self.prefix}.bin")

    def abort(self) -> None:
        self._bin.close()
        self._bin_tmp.unlink(missing_ok=True)


def index_parts(lengths: np.ndarray, dtype: np.dtype, pointers: np.ndarray | None = None) -> list:
    """The byte blocks of an `.idx`, in order; `pointers` (byte offsets into `.bin`) default to the sequences
    back to back. Given explicitly, an index can list sequences of an existing `.bin` in any order and
    repeat them (`curation.mixture.megatron`)."""
    lengths = np.asarray(lengths, dtype=np.int32)
    if pointers is None:
        pointers = np.zeros(len(lengths), dtype=np.int64)
        if len(lengths) > 1:
            np.cumsum(lengths[:-1].astype(np.int64) * np.dtype(dtype).itemsize, out=pointers[1:])
    pointers = np.asarray(pointers, dtype=np.int64)
    if pointers.shape != lengths.shape:
        raise ValueError(f"{pointers.size} pointers for {lengths.size} sequences")
    doc_idx = np.arange(len(lengths) + 1, dtype=np.int64)
    return [MAGIC, struct.pack("<Q", VERSION), struct.pack("<B", DTYPE_CODES[np.dtype(dtype)]),
            struct.pack("<Q", len(lengths)), struct.pack("<Q", len(doc_idx)), lengths, pointers, doc_idx]


def write_index(path: Path, lengths: np.ndarray, dtype: np.dtype, pointers: np.ndarray | None = None) -> None:
    tmp = Path(f"{path}.tmp")
    with named(tmp), open(tmp, "wb") as f:
        f.writelines(index_parts(lengths, dtype, pointers))
    os.replace(tmp, path)


HEADER = 34   # bytes before the lengths array
CHUNK = 1 << 22   # elements per block when streaming arrays (16-32 MB)


def read_header(path: Path) -> tuple[np.dtype, int, int]:
    """(dtype, sequence count, document count + 1) of an `.idx` file, from its first 34 bytes."""
    with open(path, "rb") as f:
        data = f.read(HEADER)
    if data[:9] != MAGIC:
        raise ValueError(f"{path}: not a Megatron index (bad magic {data[:9]!r})")
    if len(data) < HEADER:
        raise ValueError(f"{path}: truncated Megatron index ({len(data)} bytes; the header alone has {HEADER})")
    version, = struct.unpack_from("<Q", data, 9)
    code, = struct.unpack_from("<B", data, 17)
    n_seq, n_doc = struct.unpack_from("<QQ", data, 18)
    if version != VERSION or code not in CODE_DTYPES:
        raise ValueError(f"{path}: unsupported index version {version} or dtype code {code}")
    return CODE_DTYPES[code], n_seq, n_doc


def _mapped(path: Path, dtype, count: int, offset: int) -> np.ndarray:
    if count == 0:
        return np.zeros(0, dtype)
    return np.memmap(path, dtype=dtype, mode="r", offset=offset, shape=(count,))


def read_index(path: Path) -> tuple[np.dtype, np.ndarray, np.ndarray, np.ndarray]:
    """Return (dtype, sequence lengths, pointers, document index) of an `.idx` file, memory-mapped: only
    the pages a caller touches are read (a sampling plan touches the lengths, 4 bytes per document)."""
    dtype, n_seq, n_doc = read_header(path)
    size = Path(path).stat().st_size
    if size < HEADER + 12 * n_seq + 8 * n_doc:
        raise ValueError(f"{path}: truncated Megatron index ({size} bytes for {n_seq} sequences)")
    lengths = _mapped(path, np.int32, n_seq, HEADER)
    pointers = _mapped(path, np.int64, n_seq, HEADER + 4 * n_seq)
    doc_idx = _mapped(path, np.int64, n_doc, HEADER + 12 * n_seq)
    return dtype, lengths, pointers, doc_idx


def iter_lengths(path: Path, chunk: int = CHUNK, first: int = 0, stop: int | None = None) -> Iterator[np.ndarray]:
    """The sequence lengths of an `.idx` file (those of sequences [first, stop)) in blocks of at most `chunk`,
    read with bounded memory."""
    _, n_seq, _ = read_header(path)
    end = n_seq if stop is None else min(stop, n_seq)
    with open(path, "rb") as f:
        f.seek(HEADER + 4 * first)
        for start in range(first, end, chunk):
            want = min(chunk, end - start)
            block = np.fromfile(f, dtype=np.int32, count=want)
            if block.size < want:
                raise ValueError(f"{path}: truncated Megatron index")
            yield block


def iter_tokens(prefix: Path, chunk: int = CHUNK) -> Iterator[np.ndarray]:
    """The token array of `PREFIX.bin` in blocks of at most `chunk` tokens (never the whole shard)."""
    dtype, n_seq, _ = read_header(Path(f"{prefix}.idx"))
    if n_seq == 0 and not Path(f"{prefix}.bin").exists():
        return                                   # an empty pool (`merge` writes no `.bin` for it)
    with open(f"{prefix}.bin", "rb") as f:
        while (block := np.fromfile(f, dtype=dtype, count=chunk)).size:
            yield block


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


def split_merge(parts: list[Path], prefix: Path, max_bytes: int, *, chunk: int = CHUNK, tokens=None,
                whole: dict | None = None) -> list[tuple[Path, int, dict]]:
    """`merge` into parts of at most `max_bytes` of `.bin` each, cut between documents (a document larger than
    `max_bytes` is a part of its own): each part a valid indexed dataset, their documents in order those of
    `merge`. One part keeps `prefix` (the bytes `merge` writes); several are `part_name(prefix, k)`. Returns
    (prefix, sequences, sha256 of its files) per part; `tokens(prefix)` gives the callable fed each block of
    that part's ids. `whole` receives the sha256 that `merge`'s `.bin` and `.idx` would have (`.bin`, `.idx`),
    so what identifies the documents does not depend on the part size."""
    dtype, counts = _headers(parts, prefix)
    cuts = plan_cuts(parts, dtype, max_bytes, chunk)
    whole_bin = hashlib.sha256() if len(cuts) > 1 else None   # one part: its own digest is the whole set's
    if len(cuts) == 1:
        targets = [Path(prefix)]
    else:
        targets = [part_name(prefix, k) for k in range(len(cuts))]
    written, doc, byte = [], 0, 0
    for target, (docs, nbytes) in zip(targets, cuts):
        hashes: dict = {}
        end = None if len(cuts) == 1 else byte + nbytes
        _write_range(parts, counts, target, dtype, (doc, doc + docs), (byte, end), chunk,
                     tokens(target) if tokens else None, hashes, whole_bin)
        written.append((target, docs, hashes))
        doc, byte = doc + docs, byte + nbytes
    if whole is not None:
        if whole_bin is None:
            whole[".bin"], whole[".idx"] = written[0][2].get(".bin", EMPTY_SHA256), written[0][2][".idx"]
        else:
            whole[".bin"], whole[".idx"] = whole_bin.hexdigest(), index_sha256(parts, chunk)
    return written


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


class _Hashing:
    """A file opened for writing that also hashes what is written to it."""

    def __init__(self, f, h):
        self.f, self.h = f, h

    def write(self, data: bytes) -> int:
        self.h.update(data)
        return self.f.write(data)


def has_tokens(prefix: Path) -> bool:
    """Whether an indexed dataset holds any sequence (an empty one is an `.idx` with no `.bin`: `merge`)."""
    return read_header(Path(f"{prefix}.idx"))[1] > 0


def read_tokens(prefix: Path) -> np.ndarray:
    dtype, lengths, _, _ = read_index(Path(f"{prefix}.idx"))
    if not lengths.size and not Path(f"{prefix}.bin").exists():
        return np.zeros(0, dtype=dtype)          # an empty pool (`merge` writes no `.bin` for it)
    return np.fromfile(f"{prefix}.bin", dtype=dtype)
