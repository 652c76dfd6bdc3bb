"""Perceptual-hash dedup of image samples by domain (Apertus 1.5 §2.2.1).

Within each domain (and pHash input size), images whose pHashes lie within the domain's radius (`image_dedup` in the
recipe; 0 = equal hashes, the default; null = the domain is not deduplicated, e.g. documents, whose
pages look alike) are linked, across sources, through the exact Hamming index; each connected group
keeps its earliest member in canonical order (recipe source order, shard, row), like text dedup.
Samples the exact phase already removes take no part. Drops are listed under the tokenize step
`exact_dedup` (reason `image_near_duplicate`); clusters go to the ledger table `image_clusters`.

Every image of an interleaved document takes part as one member (named `source/id#k`, k its index in the
document), in the same groups as image samples: a duplicate image removes the image from its document,
not the document (a drop-list row with `image` set; the document's text is deduplicated by MinHash), so a
page that repeats a logo or reuses a photo keeps its text and its other images. A duplicate image
sample is removed whole, as before, also when its earlier copy sits inside a document.
"""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from curation.core.graph import CLUSTER_COLUMNS, cluster_row, components, groups
from curation.core.hamming import HammingIndex
from curation.core.layout import processed_path
from curation.corpus.near import NearDuplicatePhase
from curation.steps.interleaved.document import image_hashes

CLUSTERS = pa.schema([CLUSTER_COLUMNS[0], ("domain", pa.string()), *CLUSTER_COLUMNS[1:]])


def image_duplicates(out: Path, shards: list[tuple[str, str]], radii: dict, gone: set) -> tuple[list[dict], pa.Table]:
    """(drop rows, cluster table) over the image shards; `gone`: (source, id) already removed."""
    # (domain, pHash reduction) -> (source, shard, id, image index or None, hash): only hashes made alike are compared
    entries: dict[tuple[str, int], list[tuple[str, str, str, int | None, int]]] = {}
    for source, shard in shards:
        t = pq.read_table(processed_path(out, source, shard), columns=["id", "meta"])
        for rid, meta in zip(t.column("id").to_pylist(), t.column("meta").to_pylist()):
            if (source, rid) not in gone:
                for k, phash, domain, reduce in image_hashes(json.loads(meta)):
                    entries.setdefault((domain, reduce), []).append((source, shard, rid, k, phash))
    rows, clusters = [], []
    for domain, reduce in sorted(entries):
        radius = radii.get(domain, 0)
        if radius is None:
            continue
        items = entries[(domain, reduce)]
        hashes = np.array([h for *_, h in items], dtype=np.uint64)
        qi, hi = HammingIndex(hashes).query_many(hashes, radius)
        labels = components(len(items), np.stack([qi, hi], axis=1)[qi < hi])
        names = [(s, rid if k is None else f"{rid}#{k}") for s, _, rid, k, _ in items]
        for root, ms in groups(labels).items():
            row = cluster_row(names, root, ms)
            for i in ms[1:]:
                rows.append({"source": items[i][0], "shard": items[i][1], "id": items[i][2],
                             "reason": "image_near_duplicate", "detail": row["cluster"], "image": items[i][3]})
            clusters.append({**row, "domain": domain})
    order = {s: k for k, s in enumerate(shards)}   # drop rows in canonical order, as the exact phase's
    rows.sort(key=lambda r: order[(r["source"], r["shard"])])
    return rows, pa.Table.from_pylist(clusters, schema=CLUSTERS)


class ImageNearPhase(NearDuplicatePhase):
    name = "image_near"
    modalities = ("image", "interleaved")
    table = "image_clusters"
    clusters = CLUSTERS

    def settings(self, recipe) -> dict:
        return {"radii": recipe.image_dedup}

    def find(self, out: Path, shards: list[tuple[str, str]], settings: dict, gone: set):
        return image_duplicates(out, shards, settings["radii"], gone)
