"""Atomic file writes: every output goes to a temporary name, then is renamed into place, so a
crash never leaves a half-written file under its final name."""
from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from curation.core.faults import named


def atomic_write_bytes(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    with named(tmp):
        tmp.write_bytes(data)
    os.replace(tmp, path)


def atomic_write_json(path: Path, obj) -> None:
    atomic_write_bytes(path, (json.dumps(obj, indent=1, sort_keys=True, ensure_ascii=False) + "\n").encode())


def atomic_write_parquet(path: Path, table: pa.Table) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    with named(tmp):
        pq.write_table(table, tmp, compression="zstd")
    os.replace(tmp, path)


def atomic_write_jsonl(path: Path, rows: list[dict]) -> None:
    """Write rows, or remove a stale file when there are none."""
    if not rows:
        path.unlink(missing_ok=True)
        return
    atomic_write_bytes(path, "".join(json.dumps(r, sort_keys=True, ensure_ascii=False) + "\n"
                                     for r in rows).encode())


def save_array(path: Path, array: np.ndarray) -> dict:
    """Write an array as `.npy` atomically (no pickling); returns {"sha256": ...}."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    with named(tmp), open(tmp, "wb") as f:
        np.save(f, array, allow_pickle=False)
    tmp.replace(path)
    return {"sha256": hashlib.sha256(path.read_bytes()).hexdigest()}


def npy_row_pieces(read: Callable[[int, int], bytes], window: Callable[[int], tuple[int, int]]) -> list[tuple[int, bytes]]:
    """The pieces of a `.npy` file (`save_array`'s) that hold rows `window(rows)` = (lo, hi) of its array:
    (offset, bytes) of its header and of those rows, fetched with `read(start, end)`, and an empty piece at
    its end, so that a sparse file of these pieces is as long as the file and `np.load(mmap_mode="r")` maps
    it (reading only those rows gives the same bytes as from the whole file)."""
    import io
    import struct
    head = read(0, 128)   # numpy pads the header so the data starts at a multiple of 64: 128 covers most
    major = head[6]       # b"\x93NUMPY", major, minor, then the header's length (2 bytes in 1.0, 4 after)
    start = 10 + struct.unpack("<H", head[8:10])[0] if major == 1 else 12 + struct.unpack("<I", head[8:12])[0]
    if start > len(head):
        head = read(0, start)
    f = io.BytesIO(head)
    version = np.lib.format.read_magic(f)
    read_header = np.lib.format.read_array_header_1_0 if version == (1, 0) else np.lib.format.read_array_header_2_0
    shape, _, dtype = read_header(f)
    row = dtype.itemsize * int(np.prod(shape[1:]))
    lo, hi = window(shape[0])
    return [(0, head[:start]), (start + lo * row, read(start + lo * row, start + hi * row)),
            (start + shape[0] * row, b"")]


def atomic_write_npz(path: Path, **arrays: np.ndarray) -> None:
    """Write arrays as one uncompressed `.npz` atomically (no pickling)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp.npz")   # np.savez appends .npz to names without it
    with named(tmp):
        np.savez(tmp, allow_pickle=False, **arrays)
    os.replace(tmp, path)
