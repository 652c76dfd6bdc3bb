"""Exact (content-hash) and URL dedup: one task per modality over the hash columns of its shards.

While processing, every surviving record gets `content_hash` (`curation.core.hashing.content_hash`
of its normalised text, of an image's bytes; the PCM hash of a clip). The task reads only the hash
(and URL) columns of the modality's processed shards, in canonical order, and marks every later copy
of a hash as a duplicate of the first (`exact_duplicate`); with `dedup.exact.url`, every later record
with the same normalised URL is a re-crawl of the first (`url_duplicate`). With `scope: source` the
first copy is looked for within the same source only. Hashes are compared within one modality: an
image's bytes and a document's text share no meaning.
"""
from __future__ import annotations

import json
from pathlib import Path

import pyarrow.parquet as pq

from curation.core.hashing import fingerprint
from curation.core.layout import processed_path
from curation.core.node import CODE_EPOCH, Node
from curation.core.urls import normalize_url
from curation.corpus.base import CorpusPhase, PlanContext


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
                             "duplicate_of_source": keep_source, "duplicate_of_id": keep_id,
                             "detail": f"{keep_source}/{keep_id}"})
            else:
                for k in keys:
                    first[k] = (source, rid)
    return dups


def hash_columns(out: Path, shards: list[tuple[str, str]], url_field: str | None):
    """(source, shard, hashes, ids, normalised urls) per shard, reading only those columns."""
    for source, shard in shards:
        t = pq.read_table(processed_path(out, source, shard),
                          columns=["id", "content_hash"] + (["meta"] if url_field else []))
        urls = [None] * t.num_rows
        if url_field:
            urls = [normalize_url(u) if isinstance(u := json.loads(m).get(url_field), str) else None
                    for m in t.column("meta").to_pylist()]
        yield source, shard, t.column("content_hash").to_pylist(), t.column("id").to_pylist(), urls


def exact_rows(out: Path, spec: dict) -> list[dict]:
    shards = [tuple(s) for s in spec["shards"]]
    return resolve_duplicates(list(hash_columns(out, shards, spec["cfg"]["url"])), spec["cfg"]["scope"])


class ExactPhase(CorpusPhase):
    name = "exact"
    step = "exact_dedup"

    def applies(self, recipe) -> bool:
        return recipe.dedup.exact is not None

    def covers(self, src) -> bool:
        return True

    def plan(self, ctx: PlanContext) -> list[list[Node]]:
        cfg = ctx.loaded.recipe.dedup.exact.model_dump(mode="json")
        nodes = []
        for modality in dict.fromkeys(s.modality for s in ctx.loaded.recipe.sources):
            process = [n for n in ctx.process if ctx.source(n.source).modality == modality]
            shards = [(n.source, n.shard) for n in process]
            nodes.append(Node("exact", None, modality, fingerprint(
                {"v": CODE_EPOCH, "phase": "exact", "cfg": cfg,
                 "process": [[n.source, n.shard, n.fingerprint] for n in process]}),
                deps=[n.key for n in process], spec={"cfg": cfg, "shards": shards}))
        return [nodes]

    def drop_node(self, stages: list[list[Node]], src) -> Node:
        return next(n for n in stages[-1] if n.shard == src.modality)

    def runners(self):
        return {"exact": self.run}

    def run(self, out: Path, node: Node) -> dict:
        rows = exact_rows(out, node.spec)
        shards = [tuple(s) for s in node.spec["shards"]]
        return {"duplicates": len(rows), "outputs": self.write_drops(out, shards, rows)}
