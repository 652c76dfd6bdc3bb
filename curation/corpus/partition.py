"""Exact dedup by hash range: the keys of a shard, their partitions, and the survivor rule over the keys
that repeat, as array functions (`curation.corpus.exact` runs them as tasks).

Every record has a content key (its 128-bit `content_hash`) and, with `dedup.exact.url`, a URL key
(BLAKE2b-128 of the normalised URL; two URLs share a key exactly when they are equal, short of a 2^-128
collision, the same standard as the content hash). The survivor rule is sequential: in canonical order
(`curation.corpus.base`), a record is kept when none of its keys belongs to an earlier *kept* record;
otherwise it is a duplicate of the kept record that owns its first such key, content before URL. So a
record whose only earlier copy was itself dropped as a re-crawl is kept (`resolve` below).

Only keys that occur twice or more can change a decision, and a record with no repeated key is kept, so:

    keys(shard)        (key, kind, row) per record, sorted by key              `shard_keys`
    part(p)            the keys in hash range p of every shard; those that
                       repeat, with their documents                            `shared_keys`
    resolve            the sequential rule over the documents with a repeated
                       key only (memory follows the duplicates)                `resolve`

A document is `shard number << 32 | row` (`document`), so sorting by it is canonical order.
"""
from __future__ import annotations

import hashlib

import numpy as np

CONTENT, URL = 0, 1
REASONS = ("exact_duplicate", "url_duplicate")    # by kind
ROW_BITS = 32
KEY_COLUMNS = 4                                    # key high 64 bits, key low 64 bits, kind, row


def url_key(url: str) -> bytes:
    return hashlib.blake2b(url.encode("utf-8"), digest_size=16).digest()


def document(shard_number: int | np.ndarray, row: np.ndarray) -> np.ndarray:
    """Canonical position of a record: its shard's number in canonical order, then its row."""
    return (np.asarray(shard_number, dtype=np.int64) << ROW_BITS) | np.asarray(row, dtype=np.int64)


def shard_keys(content: list[bytes], urls: list[str | None], first_row: int = 0) -> np.ndarray:
    """(n, 4) uint64 entries [key hi, key lo, kind, row] of records `first_row`, `first_row + 1`, ...:
    one content key each, one URL key for each record with a (normalised, non-empty) URL."""
    if any(h is None or len(h) != 16 for h in content):
        raise ValueError("a processed record has no 16-byte content_hash; re-run its process task")
    rows = np.arange(first_row, first_row + len(content), dtype=np.uint64)
    pairs = [np.frombuffer(b"".join(content), dtype="<u8").reshape(-1, 2)]
    kinds, at = [np.full(len(content), CONTENT, np.uint64)], [rows]
    with_url = [i for i, u in enumerate(urls) if u]
    if with_url:
        pairs.append(np.frombuffer(b"".join(url_key(urls[i]) for i in with_url), dtype="<u8").reshape(-1, 2))
        kinds.append(np.full(len(with_url), URL, np.uint64))
        at.append(rows[with_url])
    keys = np.concatenate(pairs) if content else np.zeros((0, 2), np.uint64)
    return np.column_stack([keys, np.concatenate(kinds), np.concatenate(at)]).astype(np.uint64)


def sort_keys(entries: np.ndarray) -> np.ndarray:
    """Entries sorted by key (then kind, row): hash range p is one contiguous slice (`range_slice`)."""
    if entries.size == 0:
        return np.zeros((0, KEY_COLUMNS), np.uint64)
    return entries[np.lexsort((entries[:, 3], entries[:, 2], entries[:, 1], entries[:, 0]))]


SHARDS_PER_PARTITION = 16   # unset `partitions` (exact and MinHash dedup): one per 16 input shards, so what a
MAX_AUTO_PARTITIONS = 1024  # hash-range or clustering task holds stays about 16 shards' worth as the corpus grows,
                            # and a task that gathers every partition's part per shard reads partitions × shards
                            # pieces, not shards² (reports/benchmarks/scale.md, 1M documents)


def auto_partitions(shards: int) -> int:
    """The partitions of an unset `dedup.exact.partitions` or `dedup.minhash.partitions` over `shards` input
    shards of the sources the phase covers."""
    return max(1, min(-(-shards // SHARDS_PER_PARTITION), MAX_AUTO_PARTITIONS))


INDEX_STRIDE = 64   # rows between two keys of a shard's range index (`range_index`): 2 KB of rows a stride, an index of
                    # 1/256 of the keys' bytes (a part task fetches the index whole and a stride at each end of its range)


def range_index(entries: np.ndarray) -> np.ndarray:
    """The key of every INDEX_STRIDE-th row of sorted `entries` (uint64): with it a hash range's rows are found
    by reading one stride of keys at each end (`range_rows`), not the whole key column."""
    return np.ascontiguousarray(np.asarray(entries[::INDEX_STRIDE, 0]), dtype=np.uint64)


def _start(value: int, parts: int) -> np.uint64:
    return np.uint64((value << 64) // parts)


def _first_at_least(entries: np.ndarray, index: np.ndarray, value: np.uint64) -> int:
    """The first row whose key is >= value: the index puts it after row (j - 1) × STRIDE, whose key is smaller,
    and at or before row j × STRIDE, whose key is not; only that stride's keys are read."""
    j = int(np.searchsorted(index, value))
    if j == 0:
        return 0
    lo, hi = (j - 1) * INDEX_STRIDE, min(j * INDEX_STRIDE, entries.shape[0])
    return lo + int(np.searchsorted(np.asarray(entries[lo:hi, 0]), value))


def range_rows(entries: np.ndarray, index: np.ndarray, part: int, parts: int) -> tuple[int, int]:
    """Rows [lo, hi) of hash range `part` of `parts` in sorted `entries`, by its `range_index`."""
    lo = _first_at_least(entries, index, _start(part, parts)) if part else 0
    hi = _first_at_least(entries, index, _start(part + 1, parts)) if part + 1 < parts else entries.shape[0]
    return lo, hi


def range_window(index: np.ndarray, rows: int, part: int, parts: int) -> tuple[int, int]:
    """Rows a task must hold of a shard's `rows` sorted entries to find and take hash range `part` by
    `range_rows`: from the stride where the range starts to the stride where it ends."""
    def stride(value, last):
        j = int(np.searchsorted(index, value))
        return (max(j - 1, 0) * INDEX_STRIDE) if not last else min(j * INDEX_STRIDE, rows)
    lo = stride(_start(part, parts), False) if part else 0
    hi = stride(_start(part + 1, parts), True) if part + 1 < parts else rows
    return lo, max(lo, hi)


def range_slice(entries: np.ndarray, part: int, parts: int, index: np.ndarray | None = None) -> np.ndarray:
    """The entries of sorted `entries` (possibly memory-mapped) whose key falls in hash range `part` of
    `parts`: keys' high 64 bits in [part * 2^64 / parts, (part + 1) * 2^64 / parts). Given the shard's
    `range_index`, only the range's rows and one stride at each end are read (not the whole key column).
    Keys are uniform hashes, so every range holds about 1/parts of them."""
    if index is not None:
        lo, hi = range_rows(entries, index, part, parts)
    else:
        col = entries[:, 0]
        lo = np.searchsorted(col, _start(part, parts)) if part else 0
        hi = np.searchsorted(col, _start(part + 1, parts)) if part + 1 < parts else col.size
    return np.asarray(entries[lo:hi])


def shared_keys(entries: np.ndarray, documents: np.ndarray, groups: np.ndarray) -> np.ndarray:
    """(m, 3) int64 [document, kind, key number] of every entry whose (group, kind, key) occurs at least
    twice; key numbers count the repeated keys from 0 in key order. `groups`: the scope of each entry
    (the source's number with `scope: source`, else 0)."""
    if entries.shape[0] == 0:
        return np.zeros((0, 3), np.int64)
    hi, lo, kind = entries[:, 0], entries[:, 1], entries[:, 2]
    order = np.lexsort((documents, lo, hi, kind, groups))
    hi, lo, kind, grp, docs = hi[order], lo[order], kind[order], groups[order], documents[order]
    new = np.ones(order.size, dtype=bool)
    new[1:] = (hi[1:] != hi[:-1]) | (lo[1:] != lo[:-1]) | (kind[1:] != kind[:-1]) | (grp[1:] != grp[:-1])
    key = np.cumsum(new) - 1
    size = np.bincount(key)
    repeated = size[key] >= 2
    _, number = np.unique(key[repeated], return_inverse=True)
    return np.column_stack([docs[repeated], kind[repeated].astype(np.int64), number]).astype(np.int64)


def resolve(shared: np.ndarray) -> np.ndarray:
    """The survivor rule over (document, kind, key) rows of the repeated keys (key numbers unique over
    all rows): (k, 3) int64 [duplicate document, kind of the key that removed it, kept document], in
    canonical order. Runs in one pass over the documents that have a repeated key, in canonical order."""
    if shared.shape[0] == 0:
        return np.zeros((0, 3), np.int64)
    shared = shared[np.lexsort((shared[:, 1], shared[:, 0]))]   # by document, content key first
    docs, kinds, keys = (shared[:, c].tolist() for c in range(3))
    owner = [-1] * (max(keys) + 1)                                # key -> the kept document that has it
    dups, i, n = [], 0, len(docs)
    while i < n:
        j = i + 1
        while j < n and docs[j] == docs[i]:
            j += 1
        hit = next((e for e in range(i, j) if owner[keys[e]] >= 0), None)
        if hit is None:
            for e in range(i, j):
                owner[keys[e]] = docs[i]
        else:
            dups.append((docs[i], kinds[hit], owner[keys[hit]]))
        i = j
    return np.asarray(dups, dtype=np.int64).reshape(-1, 3)
