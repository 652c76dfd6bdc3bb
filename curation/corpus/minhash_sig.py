"""MinHash band keys on disk, band-major: what a signatures task writes and what a band task reads of it.

One file per shard (`curation.core.layout.sig_path`, `sig/<source>/<shard>.bands`), little-endian:

    header    b"CURSIGB1", the keys' fingerprint (16 ASCII characters), documents <Q, bands <I,
              partitions <I                                                                    (40 bytes)
    table     bands × partitions + 1 byte offsets <q: segment (b, p) is [table[b·P + p], table[b·P + p + 1])
    segments  band by band, in each band partition by partition (key % partitions: the band phase's hash
              partition), each one its keys <Q (ascending, ties by row) followed by their rows <I

Band task (b, p) reads the header, two table entries and its segment with `os.pread` (`read_band`): 12 bytes
per document and band, 1/partitions of a band per task, instead of every shard's whole (documents × bands)
array for one strided column. Not memory-mapped: a map's readahead pulls whole small files in from cold
storage (an earlier attempt read 708 MB to use 17 MB). On an output URL a band task downloads just those
ranges (`band_pieces`, through `MinHashPhase.partial_reads`), not the file, and a resolve task just the header.

Output folders of earlier versions hold row-major `<shard>.npy` files (documents × bands <Q); a file may also
be laid out for another partition count (an `index:` run, or a run whose `partitions` changed). `read_band`
reads both (the whole band column, or the whole band, filtered by partition), so `dedup.minhash.index` takes
any earlier folder; in this run's own folder the signatures node's fingerprint covers the layout and the
partitions (`curation.corpus.minhash`), so its files are always this layout for this plan.
"""
from __future__ import annotations

import os
import struct
from collections.abc import Callable
from pathlib import Path

import numpy as np

from curation.core.faults import named
from curation.core.layout import sig_path, sig_rows_path

MAGIC = b"CURSIGB1"
LAYOUT = "band-major-1"             # in the signatures node's fingerprint
HEADER = struct.Struct("<8s16sQII")
_OFFSET = struct.Struct("<q")
MAX_ROWS = 1 << 32                  # rows are stored as uint32
NO_READAHEAD = True                 # POSIX_FADV_RANDOM on a band task's reads (bench_band.py measures both)


def sig_file(root: Path, source: str, shard: str) -> Path:
    """A shard's signature file: band-major, else an earlier version's row-major `.npy`."""
    path = sig_path(root, source, shard)
    return path if path.is_file() or not sig_rows_path(root, source, shard).is_file() else \
        sig_rows_path(root, source, shard)


def segments(keys: np.ndarray, parts: int):
    """(band, partition, keys, rows) of (documents × bands) keys in file order."""
    rows = np.arange(keys.shape[0], dtype=np.uint32)
    for b in range(keys.shape[1]):
        col = keys[:, b]
        part = col % np.uint64(parts)
        order = np.lexsort((rows, col, part))
        bounds = np.concatenate([[0], np.cumsum(np.bincount(part.astype(np.int64), minlength=parts))])
        for p in range(parts):
            mine = order[bounds[p]:bounds[p + 1]]
            yield b, p, col[mine], rows[mine]


def write_signatures(path: Path, keys: np.ndarray, parts: int, keys_fp: str) -> None:
    """Write (documents × bands) uint64 band keys band-major for `parts` band partitions, atomically."""
    n, bands = keys.shape
    if n >= MAX_ROWS:
        raise ValueError(f"{path}: {n} documents in one shard; at most {MAX_ROWS - 1} fit the band-major layout")
    fp = keys_fp.encode("ascii")
    if len(fp) != 16:
        raise ValueError(f"keys fingerprint {keys_fp!r} is not 16 characters")
    sizes = np.zeros(bands * parts, dtype=np.int64)
    start = HEADER.size + 8 * (bands * parts + 1)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    with named(tmp), open(tmp, "wb") as f:
        f.write(HEADER.pack(MAGIC, fp, n, bands, parts))
        f.write(b"\0" * 8 * (bands * parts + 1))                 # the table, filled in below
        for b, p, k, r in segments(keys, parts):
            f.write(k.astype("<u8").tobytes())
            f.write(r.astype("<u4").tobytes())
            sizes[b * parts + p] = 12 * k.size
        f.seek(HEADER.size)
        f.write(np.concatenate([[start], start + np.cumsum(sizes)]).astype("<i8").tobytes())
    os.replace(tmp, path)


def _pread(fd: int, size: int, at: int) -> bytes:
    chunks = []
    while size > 0:
        chunk = os.pread(fd, size, at)
        if not chunk:
            raise OSError(f"unexpected end of a signature file at byte {at}")
        chunks.append(chunk)
        size -= len(chunk)
        at += len(chunk)
    return b"".join(chunks)


def header(path: Path) -> tuple[str, int, int, int] | None:
    """(keys fingerprint, documents, bands, partitions) of a band-major file; None for another file."""
    with open(path, "rb", buffering=0) as f:   # the 40 bytes, not a buffer's 8 KB (cc_resolve reads every shard's)
        head = f.read(HEADER.size)
    if len(head) < HEADER.size or head[:8] != MAGIC:
        return None
    _, fp, n, bands, parts = HEADER.unpack(head)
    return fp.decode("ascii"), n, bands, parts


def documents(path: Path) -> int:
    """The number of documents in a shard's signature file (either layout)."""
    if path.suffix == ".npy":
        return int(np.load(path, mmap_mode="r").shape[0])
    found = header(path)
    if found is None:
        raise ValueError(f"{path} is no band-major signature file")
    return found[1]


def _read_segments(pread, first: int, last: int) -> tuple[np.ndarray, np.ndarray]:
    """Keys and rows of segments first .. last - 1 (one table read, one data read; `pread(size, at)`)."""
    table = np.frombuffer(pread(8 * (last - first + 1), HEADER.size + 8 * first), dtype="<i8")
    data = pread(int(table[-1] - table[0]), int(table[0]))
    keys, rows = [], []
    for lo, hi in zip((table[:-1] - table[0]).tolist(), (table[1:] - table[0]).tolist()):
        m = (hi - lo) // 12
        keys.append(np.frombuffer(data, dtype="<u8", count=m, offset=lo))
        rows.append(np.frombuffer(data, dtype="<u4", count=m, offset=lo + 8 * m))
    return (np.concatenate(keys).astype(np.uint64) if keys else np.zeros(0, np.uint64),
            np.concatenate(rows).astype(np.int64) if rows else np.zeros(0, np.int64))


def _band(pread, name: object, band: int, part: int, parts: int) -> tuple[np.ndarray, np.ndarray, int]:
    """`read_band` of a band-major file read with `pread(size, at)`: the header, two table entries and one
    segment when the file is laid out for `parts`, else the whole band's table and data."""
    magic, _, n, bands, have = HEADER.unpack(pread(HEADER.size, 0))
    if magic != MAGIC or band >= bands:
        raise ValueError(f"{name}: no band {band} in this signature file")
    if have == parts:
        keys, rows = _read_segments(pread, band * have + part, band * have + part + 1)
    else:   # laid out for another partition count: the whole band, filtered
        keys, rows = _read_segments(pread, band * have, (band + 1) * have)
        mine = keys % np.uint64(parts) == part
        keys, rows = keys[mine], rows[mine]
    return keys, rows, int(n)


def read_band(path: Path, band: int, part: int, parts: int) -> tuple[np.ndarray, np.ndarray, int]:
    """(keys, rows, documents): the keys of band `band` of one shard that fall in partition `part` of `parts`
    (key % parts), with their rows in the shard, and the shard's document count. Rows ascending within a key."""
    if path.suffix == ".npy":   # an earlier version's row-major file: the whole file, for one strided column
        col = np.asarray(np.load(path, mmap_mode="r")[:, band])
        mine = np.flatnonzero(col % np.uint64(parts) == part) if parts > 1 else np.arange(col.size)
        return col[mine], mine.astype(np.int64), int(col.size)
    fd = os.open(path, os.O_RDONLY)
    try:
        if NO_READAHEAD:
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_RANDOM)   # no readahead beyond the pages asked for
        return _band(lambda size, at: _pread(fd, size, at), path, band, part, parts)
    finally:
        os.close(fd)


Pieces = list[tuple[int, bytes]]   # (offset, bytes) of a file: what a task reads of it
COALESCE = 1 << 14                  # one ranged GET for the header and table entries that lie this near


def band_pieces(read: Callable[[int, int], bytes], band: int, part: int, parts: int) -> Pieces:
    """The byte ranges of a band-major file that `read_band(path, band, part, parts)` reads, fetched with
    `read(start, end)`: a band task on an output URL downloads these, not the file (`curation.runtime.publish`),
    so the band phase reads each signature once in all instead of every file once per task. Two requests a
    file where the task's table entries lie within COALESCE bytes of the start (the header and the table up
    to them in one, at 63 partitions 7 KB at most; a request costs more than that), else three; then its
    segment."""
    end = HEADER.size + 8 * (band * parts + part + 2)
    first = read(0, end if end <= COALESCE else HEADER.size)
    pieces: Pieces = [(0, first)]

    def pread(size: int, at: int) -> bytes:
        if at + size <= len(first):
            return first[at:at + size]
        if not size:   # an empty segment: no request (an object store reads `bytes=at-(at-1)` as the whole object)
            return b""
        data = read(at, at + size)
        pieces.append((at, data))
        return data
    _band(pread, "the signature file", band, part, parts)
    return pieces


def header_pieces(read: Callable[[int, int], bytes]) -> Pieces:
    """The bytes `documents` reads of a band-major file: its header."""
    return [(0, read(0, HEADER.size))]


def read_keys(path: Path) -> np.ndarray:
    """The whole (documents × bands) array of a shard (either layout): what the row-major file held."""
    if path.suffix == ".npy":
        return np.load(path)
    found = header(path)
    if found is None:
        raise ValueError(f"{path} is no band-major signature file")
    _, n, bands, parts = found
    out = np.zeros((n, bands), dtype=np.uint64)
    fd = os.open(path, os.O_RDONLY)
    try:
        for b in range(bands):
            keys, rows = _read_segments(lambda size, at: _pread(fd, size, at), b * parts, (b + 1) * parts)
            out[rows, b] = keys
    finally:
        os.close(fd)
    return out
