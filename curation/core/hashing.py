"""Content hashes: sha256 of files, and the short stable fingerprint of a JSON-able object."""
from __future__ import annotations

import hashlib
import json
import secrets
from pathlib import Path
from typing import Any

_CANONICAL: dict[str, Any] = {"sort_keys": True, "separators": (",", ":"), "ensure_ascii": False}


def sha256_file(path: Path, chunk: int = 1 << 20) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while block := f.read(chunk):
            h.update(block)
    return h.hexdigest()


class Encoded:
    """A value's canonical JSON, encoded once, for the fingerprints of many nodes that embed the same large
    value (every band task's fingerprint lists every signature shard): `fingerprint` splices the text in, so
    the result is exactly that of the value itself, without encoding it once per node."""
    __slots__ = ("text",)

    def __init__(self, value: Any):
        self.text = json.dumps(value, **_CANONICAL)


def fingerprint(obj: Any) -> str:
    """Stable short hash of a JSON-able object (sorted keys, no whitespace); `Encoded` values count as the
    values they encode."""
    texts: list[str] = []
    mark = f"\x00{secrets.token_hex(8)}:"   # no JSON-able value of a plan holds this string

    def encoded(value: Any) -> str:
        if not isinstance(value, Encoded):
            raise TypeError(f"Object of type {type(value).__name__} is not JSON serializable")
        texts.append(value.text)
        return f"{mark}{len(texts) - 1}"
    blob = json.dumps(obj, default=encoded, **_CANONICAL)
    if texts:   # each placeholder is encoded as a JSON string: replace it, quotes included, by the text
        quoted = json.dumps(mark, **_CANONICAL)[:-1]
        for i, text in enumerate(texts):
            blob = blob.replace(f'{quoted}{i}"', text, 1)
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


def content_hash(data: bytes | str) -> bytes:
    """BLAKE2b-128 of a record's content (text as UTF-8): what exact dedup compares."""
    return hashlib.blake2b(data.encode("utf-8") if isinstance(data, str) else data, digest_size=16).digest()
