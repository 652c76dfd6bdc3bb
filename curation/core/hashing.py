"""Content hashes: sha256 of files, and the short stable fingerprint of a JSON-able object."""
from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any


def sha256_file(path: Path, chunk: int = 1 << 20) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while block := f.read(chunk):
            h.update(block)
    return h.hexdigest()


def fingerprint(obj: Any) -> str:
    """Stable short hash of a JSON-able object (sorted keys, no whitespace)."""
    blob = json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


def content_hash(data: bytes | str) -> bytes:
    """BLAKE2b-128 of a record's content (text as UTF-8): what exact dedup compares."""
    return hashlib.blake2b(data.encode("utf-8") if isinstance(data, str) else data, digest_size=16).digest()
