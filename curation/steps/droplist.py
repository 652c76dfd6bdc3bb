"""Exact (content-hash) and URL dedup in two phases joined by a file on disk.

1. While processing, every surviving record gets `content_hash` = BLAKE2b-128 of its
   normalised text (stored in the processed shard).
2. `resolve_duplicates` reads only the hash (and URL) columns of all processed shards, in a
   fixed order (recipe source order, then shard, then row), and marks every later copy of a
   hash as a duplicate of the first (`exact_duplicate`); with a URL field, every later record
   with the same normalised URL is a re-crawl of the first (`url_duplicate`). With
   `scope: source` the first copy is looked for within the same source only. The order never
   depends on worker count or task timing.
3. `ExactDedup` drops the marked rows in each shard, each with its reason.
"""
from __future__ import annotations

import hashlib

from curation.core.record import Drop, Record
from curation.steps.base import Filter


def content_hash(text: str) -> bytes:
    return hashlib.blake2b(text.encode("utf-8"), digest_size=16).digest()


def resolve_duplicates(shards: list[tuple[str, str, list[bytes], list[str], list[str | None]]],
                       scope: str) -> list[dict]:
    """`shards`: (source, shard_id, hashes, ids, urls) in canonical order -> one row per duplicate.

    `urls` holds normalised URLs (None where a record has none); content equality is checked first."""
    first: dict = {}
    dups = []
    for source, shard, hashes, ids, urls in shards:
        for h, rid, url in zip(hashes, ids, urls):
            keys = [("exact_duplicate", h)] + ([("url_duplicate", url)] if url else [])
            if scope == "source":
                keys = [(source, *k) for k in keys]
            hit = next((k for k in keys if k in first), None)
            if hit is not None:
                keep_source, keep_id = first[hit]
                dups.append({"source": source, "shard": shard, "id": rid, "reason": hit[-2],
                             "duplicate_of_source": keep_source, "duplicate_of_id": keep_id})
            else:
                for k in keys:
                    first[k] = (source, rid)
    return dups


class DropListed(Filter):
    """Drops the records a dedup phase listed, each with its reason (id -> reason)."""

    def __init__(self, name: str, reasons: dict[str, str], **kw):
        self.name = name
        super().__init__(**kw)
        self.reasons = reasons

    def keep(self, record: Record) -> bool | Drop:
        reason = self.reasons.get(record.id)
        return Drop(reason) if reason else True


def ExactDedup(reasons: dict[str, str], **kw) -> DropListed:  # noqa: N802 - reads as a step type
    return DropListed("exact_dedup", reasons, **kw)
