"""The `tokens` table's pools: one row per source and merged shard set, so the table sums to the shards.

A source's merge writes its main shards and, for some sources, other sets beside them (`core.layout`:
an audio source's `.long_context` pool, a text source's `.no_reasoning` copy). The ledger counts each
from its own `.idx`/`.bin`: the `tokens` total is every token a trainer could be handed. What a source
contributes to the corpus (kept documents, the mixture's raw tokens) is its main pool.
"""
from __future__ import annotations

MAIN_POOL = "main"


def pool_name(suffix: str) -> str:
    """The pool of a shard suffix: "main" for the main shards, else the suffix's name (`long_context`, ...)."""
    return suffix.lstrip(".") or MAIN_POOL


def main_pool(rows: dict) -> dict[str, dict]:
    """Each source's `tokens` row of its main shards."""
    return {t["source"]: t for t in rows["tokens"] if t["pool"] == MAIN_POOL}
