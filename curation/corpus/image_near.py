"""Perceptual-hash dedup of image samples by domain (Apertus 1.5 §2.2.1), run with exact dedup.

Within each domain, images whose pHashes lie within the domain's radius (`image_dedup` in the
recipe; 0 = equal hashes, the default; null = the domain is not deduplicated, e.g. documents, whose
pages look alike) are linked, across sources, through the exact Hamming index; each connected group
keeps its earliest member in canonical order (recipe source order, shard, row), like text dedup.
Samples already listed as exact duplicates take no part.
"""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from curation.core.graph import components
from curation.core.hamming import HammingIndex

CLUSTERS = pa.schema([("cluster", pa.string()), ("domain", pa.string()), ("kept_source", pa.string()),
                      ("kept_id", pa.string()), ("size", pa.int64()), ("members", pa.list_(pa.string())),
                      ("sources", pa.list_(pa.string()))])


def image_duplicates(out: Path, shards: list[tuple[str, str]], spec: dict,
                     exact_rows: list[dict]) -> tuple[list[dict], pa.Table]:
    from curation.core.layout import processed_path
    gone = {(r["source"], r["id"]) for r in exact_rows}
    entries: dict[str, list[tuple[str, str, str, int]]] = {}  # domain -> (source, shard, id, hash)
    for source, shard in shards:
        if source not in spec["sources"]:
            continue
        t = pq.read_table(processed_path(out, source, shard), columns=["id", "meta"])
        for rid, meta in zip(t.column("id").to_pylist(), t.column("meta").to_pylist()):
            if (source, rid) not in gone:
                m = json.loads(meta)
                entries.setdefault(m["domain"], []).append((source, shard, rid, int(m["phash"], 16)))
    rows, clusters = [], []
    for domain in sorted(entries):
        radius = spec["radii"].get(domain, 0)
        if radius is None:
            continue
        items = entries[domain]
        hashes = np.array([h for *_, h in items], dtype=np.uint64)
        qi, hi = HammingIndex(hashes).query_many(hashes, radius)
        edges = np.stack([qi, hi], axis=1)[qi < hi]
        labels = components(len(items), edges)
        members: dict[int, list[int]] = {}
        for i in np.flatnonzero(labels != np.arange(len(items))).tolist():
            root = int(labels[i])
            members.setdefault(root, [root]).append(i)
            rows.append({"source": items[i][0], "shard": items[i][1], "id": items[i][2],
                         "reason": "image_near_duplicate", "duplicate_of_source": items[root][0],
                         "duplicate_of_id": items[root][2]})
        for root, ms in sorted(members.items()):
            name = lambda j: f"{items[j][0]}/{items[j][2]}"  # noqa: E731
            clusters.append({"cluster": name(root), "domain": domain, "kept_source": items[root][0],
                             "kept_id": items[root][2], "size": len(ms), "members": [name(j) for j in ms],
                             "sources": sorted({items[j][0] for j in ms})})
    return rows, pa.Table.from_pylist(clusters, schema=CLUSTERS)
