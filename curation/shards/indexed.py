"""Megatron indexed datasets (`.bin` + `.idx`), written and read without megatron-core (merged in
`curation.shards.merging`).

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

import os
import struct
from collections.abc import Iterator
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


def has_tokens(prefix: Path) -> bool:
    """Whether an indexed dataset holds any sequence (an empty one is an `.idx` with no `.bin`: `merge`)."""
    return read_header(Path(f"{prefix}.idx"))[1] > 0


def read_tokens(prefix: Path) -> np.ndarray:
    dtype, lengths, _, _ = read_index(Path(f"{prefix}.idx"))
    if not lengths.size and not Path(f"{prefix}.bin").exists():
        return np.zeros(0, dtype=dtype)          # an empty pool (`merge` writes no `.bin` for it)
    return np.fromfile(f"{prefix}.bin", dtype=dtype)
