"""Atomic file writes and completion markers.

Every task writes each output to a temporary name and renames it into place, then writes a
marker `work/markers/<node key>.json` holding its fingerprint and its step counts. A node
is done when its marker exists with the node's current fingerprint; a re-run skips it and
reads its counts from the marker, so the ledger is the same whether or not work was redone.
"""
from __future__ import annotations

import json
import os
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq


def atomic_write_bytes(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_bytes(data)
    os.replace(tmp, path)


def atomic_write_json(path: Path, obj) -> None:
    atomic_write_bytes(path, (json.dumps(obj, indent=1, sort_keys=True, ensure_ascii=False) + "\n").encode())


def atomic_write_parquet(path: Path, table: pa.Table) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    pq.write_table(table, tmp, compression="zstd")
    os.replace(tmp, path)


def atomic_write_jsonl(path: Path, rows: list[dict]) -> None:
    """Write rows, or remove a stale file when there are none."""
    if not rows:
        path.unlink(missing_ok=True)
        return
    atomic_write_bytes(path, "".join(json.dumps(r, sort_keys=True, ensure_ascii=False) + "\n"
                                     for r in rows).encode())


def marker_path(out: Path, key: str) -> Path:
    return out / "work" / "markers" / f"{key}.json"


def read_marker(out: Path, key: str, fingerprint: str) -> dict | None:
    path = marker_path(out, key)
    try:
        marker = json.loads(path.read_text())
    except (FileNotFoundError, json.JSONDecodeError):
        return None
    return marker if marker.get("fingerprint") == fingerprint else None


def write_marker(out: Path, key: str, fingerprint: str, payload: dict) -> dict:
    marker = {"fingerprint": fingerprint, **payload}
    atomic_write_json(marker_path(out, key), marker)
    return marker
