"""Exact (content-hash) dedup in two phases joined by a file on disk.

1. While processing, every surviving record gets `content_hash` = BLAKE2b-128 of its
   normalised text (stored in the processed shard).
2. `resolve_duplicates` reads only the hash columns of all processed shards, in a fixed
   order (recipe source order, then shard, then row), and marks every later copy of a hash
   as a duplicate of the first. With `scope: source` the first copy is looked for within
   the same source only. The order never depends on worker count or task timing.
3. `ExactDedup` drops the marked rows in each shard (reason `exact_duplicate`).
"""
from __future__ import annotations

import hashlib

from curation.steps.base import Drop, Filter, Record


def content_hash(text: str) -> bytes:
    return hashlib.blake2b(text.encode("utf-8"), digest_size=16).digest()


def resolve_duplicates(shards: list[tuple[str, str, list[bytes], list[str]]], scope: str) -> list[dict]:
    """`shards`: (source, shard_id, hashes, ids) in canonical order -> one row per duplicate."""
    first: dict[tuple[str, bytes] | bytes, tuple[str, str]] = {}
    dups = []
    for source, shard, hashes, ids in shards:
        for h, rid in zip(hashes, ids):
            key = (source, h) if scope == "source" else h
            if key in first:
                keep_source, keep_id = first[key]
                dups.append({"source": source, "shard": shard, "id": rid,
                             "duplicate_of_source": keep_source, "duplicate_of_id": keep_id})
            else:
                first[key] = (source, rid)
    return dups


class DropListed(Filter):
    """Drops the records whose ids a dedup phase listed (exact or near duplicates)."""

    def __init__(self, name: str, reason: str, ids: set[str], **kw):
        self.name = name
        super().__init__(**kw)
        self.reason = reason
        self.ids = ids

    def keep(self, record: Record) -> bool | Drop:
        return Drop(self.reason) if record.id in self.ids else True


def ExactDedup(duplicate_ids: set[str], **kw) -> DropListed:  # noqa: N802 - reads as a step type
    return DropListed("exact_dedup", "exact_duplicate", duplicate_ids, **kw)
