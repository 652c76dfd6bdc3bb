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

import os
import struct
from pathlib import Path

import numpy as np

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
        self._bin.write(arr.tobytes())
        self.lengths.append(int(arr.size))

    def close(self) -> None:
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
    with open(tmp, "wb") as f:
        f.writelines(index_parts(lengths, dtype, pointers))
    os.replace(tmp, path)


def read_index(path: Path) -> tuple[np.dtype, np.ndarray, np.ndarray, np.ndarray]:
    """Return (dtype, sequence lengths, pointers, document index) of an `.idx` file."""
    data = Path(path).read_bytes()
    if data[:9] != MAGIC:
        raise ValueError(f"{path}: not a Megatron index (bad magic {data[:9]!r})")
    version, = struct.unpack_from("<Q", data, 9)
    code, = struct.unpack_from("<B", data, 17)
    n_seq, n_doc = struct.unpack_from("<QQ", data, 18)
    if version != VERSION or code not in CODE_DTYPES:
        raise ValueError(f"{path}: unsupported index version {version} or dtype code {code}")
    off = 34
    lengths = np.frombuffer(data, np.int32, n_seq, off); off += 4 * n_seq
    pointers = np.frombuffer(data, np.int64, n_seq, off); off += 8 * n_seq
    doc_idx = np.frombuffer(data, np.int64, n_doc, off)
    return CODE_DTYPES[code], lengths, pointers, doc_idx


def merge(parts: list[Path], prefix: Path) -> None:
    """Concatenate indexed datasets (given by prefix, in order) into one, atomically."""
    prefix.parent.mkdir(parents=True, exist_ok=True)
    lengths, dtype = [], np.dtype(np.int32)
    bin_tmp = Path(f"{prefix}.bin.tmp")
    with open(bin_tmp, "wb") as out:
        for part in parts:
            dtype, lens, _, _ = read_index(Path(f"{part}.idx"))
            lengths.append(np.asarray(lens))
            with open(f"{part}.bin", "rb") as f:
                while block := f.read(1 << 22):
                    out.write(block)
    all_lengths = np.concatenate(lengths) if lengths else np.zeros(0, np.int32)
    write_index(Path(f"{prefix}.idx"), all_lengths, dtype)
    os.replace(bin_tmp, f"{prefix}.bin")


def read_tokens(prefix: Path) -> np.ndarray:
    dtype, _, _, _ = read_index(Path(f"{prefix}.idx"))
    return np.fromfile(f"{prefix}.bin", dtype=dtype)
