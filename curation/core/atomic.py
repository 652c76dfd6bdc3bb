"""Atomic file writes: every output goes to a temporary name, then is renamed into place, so a
crash never leaves a half-written file under its final name."""
from __future__ import annotations

import hashlib
import json
import os
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


def atomic_write_npz(path: Path, **arrays: np.ndarray) -> None:
    """Write arrays as one uncompressed `.npz` atomically (no pickling)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp.npz")   # np.savez appends .npz to names without it
    with named(tmp):
        np.savez(tmp, allow_pickle=False, **arrays)
    os.replace(tmp, path)
