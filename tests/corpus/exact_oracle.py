"""The exact-dedup survivor rule as it was implemented before it was partitioned by hash range: one
sequential pass over every record of the corpus in canonical order, holding every key. Kept verbatim as
the oracle the partitioned implementation (`curation.corpus.exact`) is proved against."""
from __future__ import annotations


def sequential_duplicates(shards: list[tuple[str, str, list[bytes], list[str], list[str | None]]],
                          scope: str) -> list[dict]:
    """`shards`: (source, shard_id, hashes, ids, urls) in canonical order -> one row per duplicate."""
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
                             "duplicate_of_source": keep_source, "duplicate_of_id": keep_id,
                             "detail": f"{keep_source}/{keep_id}"})
            else:
                for k in keys:
                    first[k] = (source, rid)
    return dups
