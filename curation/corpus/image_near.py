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

from curation.core.atomic import atomic_write_parquet
from curation.core.graph import CLUSTER_COLUMNS, cluster_row, components, groups
from curation.core.hamming import HammingIndex
from curation.core.hashing import fingerprint
from curation.core.layout import drops_path, processed_path, work_dir
from curation.core.node import CODE_EPOCH, Node
from curation.corpus.base import CorpusPhase, PlanContext
from curation.steps.droplist import read_drops
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
            for i in ms[1:]:
                rows.append({"source": items[i][0], "shard": items[i][1], "id": items[i][2],
                             "reason": "image_near_duplicate", "image": items[i][3]})
            clusters.append({**cluster_row(names, root, ms), "domain": domain})
    order = {s: k for k, s in enumerate(shards)}   # drop rows in canonical order, as the exact phase's
    rows.sort(key=lambda r: order[(r["source"], r["shard"])])
    return rows, pa.Table.from_pylist(clusters, schema=CLUSTERS)


class ImageNearPhase(CorpusPhase):
    name = "image_near"
    step = "exact_dedup"
    tables = {"image_clusters": pa.schema([("run", pa.string()), *CLUSTERS])}

    def applies(self, recipe) -> bool:
        return any(self.covers(s) for s in recipe.sources)

    def covers(self, src) -> bool:
        return src.modality in ("image", "interleaved")

    def plan(self, ctx: PlanContext) -> list[list[Node]]:
        r = ctx.loaded.recipe
        process = [n for n in ctx.process if self.covers(ctx.source(n.source))]
        exact = r.dedup.exact is not None
        # the exact phase's nodes of the covered modalities (one per modality), whose removals take no part
        ex = sorted({f"exact/{ctx.source(n.source).modality}" for n in process}) if exact else []
        node = Node("image_near", None, None, fingerprint(
            {"v": CODE_EPOCH, "phase": "image_near", "radii": r.image_dedup,
             "exact": [ctx.planned[k].fingerprint for k in ex] if exact else None,
             "process": [[n.source, n.shard, n.fingerprint] for n in process]}),
            deps=[n.key for n in process] + ex,
            spec={"radii": r.image_dedup, "exact": exact, "shards": [(n.source, n.shard) for n in process]})
        return [[node]]

    def runners(self):
        return {"image_near": self.run}

    def run(self, out: Path, node: Node) -> dict:
        shards = [tuple(s) for s in node.spec["shards"]]
        gone = {(s, i) for s, sh in shards for i in read_drops(drops_path(out, "exact", s, sh))} \
            if node.spec["exact"] else set()
        rows, clusters = image_duplicates(out, shards, node.spec["radii"], gone)
        path = work_dir(out, self.name) / "clusters.parquet"
        atomic_write_parquet(path, clusters)
        return {"duplicates": len(rows), "outputs": [*self.write_drops(out, shards, rows), str(path.relative_to(out))]}

    def ledger_rows(self, run: str, nodes: list[Node], markers: dict, out: Path, totals: dict) -> dict[str, list[dict]]:
        clusters = pq.read_table(work_dir(out, self.name) / "clusters.parquet").to_pylist()
        return {"image_clusters": [{"run": run, **c} for c in clusters]}
