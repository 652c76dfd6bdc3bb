"""Audio duplicates across the run (no peer tool has them).

Exact: clips whose 16-bit 24 kHz PCM hashes are equal (`curation.steps.audio.fingerprint.pcm_hash`, the
processed table's `content_hash`): the same audio in another lossless file, or padded with digital
silence. Near: clips whose spectral fingerprints (`curation.steps.audio.fingerprint`) match within the
bit error rate of both sources' `near_dup_ber`: the same recording re-encoded, resampled or trimmed.
Clusters link clips within and across sources; each keeps its earliest member in canonical order
(recipe source order, shard, row) and the others are dropped as `audio_duplicate` /
`audio_near_duplicate` under the tokenize step `exact_dedup`. Clips the exact phase already removes
take no part. Clusters go to the ledger table `audio_clusters`.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from curation.core.atomic import atomic_write_parquet
from curation.core.graph import CLUSTER_COLUMNS, cluster_row, components, groups
from curation.core.hashing import fingerprint
from curation.core.layout import drops_path, processed_path, work_dir
from curation.core.node import CODE_EPOCH, Node
from curation.corpus.base import CorpusPhase, PlanContext
from curation.steps.audio.fingerprint import near_duplicates
from curation.steps.droplist import read_drops

CLUSTERS = pa.schema([CLUSTER_COLUMNS[0], ("kind", pa.string()), *CLUSTER_COLUMNS[1:], ("max_ber", pa.float64())])


def audio_duplicates(out: Path, shards: list[tuple[str, str]], ber: dict[str, float | None],
                     gone: set) -> tuple[list[dict], pa.Table]:
    """(drop rows, cluster table) over the audio shards; `gone`: (source, id) already removed."""
    items: list[tuple[str, str, str]] = []
    hashes, prints = [], []
    for source, shard in shards:
        t = pq.read_table(processed_path(out, source, shard), columns=["id", "content_hash", "fingerprint"])
        for rid, h, fp in zip(t.column("id").to_pylist(), t.column("content_hash").to_pylist(),
                              t.column("fingerprint").to_pylist()):
            if (source, rid) not in gone:
                items.append((source, shard, rid))
                hashes.append(h)
                prints.append(np.frombuffer(fp, dtype="<u4"))
    edges, kind, worst = [], {}, {}
    first: dict[bytes, int] = {}
    for i, h in enumerate(hashes):
        if h in first:
            edges.append((first[h], i))
            kind[(first[h], i)], worst[(first[h], i)] = "exact", 0.0
        else:
            first[h] = i
    limits = [b for b in ber.values() if b is not None]
    if limits:
        candidates = [(i, p) for i, p in enumerate(prints) if ber[items[i][0]] is not None]
        for a, b, rate in near_duplicates(candidates, ber_threshold=max(limits)):
            a, b = min(a, b), max(a, b)
            if rate <= min(ber[items[a][0]], ber[items[b][0]]) and (a, b) not in kind:
                edges.append((a, b))
                kind[(a, b)], worst[(a, b)] = "near", float(rate)
    labels = components(len(items), np.asarray(edges, dtype=np.int64).reshape(-1, 2))
    names = [(s, rid) for s, _, rid in items]
    rows, clusters = [], []
    for root, ms in groups(labels).items():
        ms_set = set(ms)
        es = [e for e in kind if e[0] in ms_set]
        exact_only = all(kind[e] == "exact" for e in es)
        row = cluster_row(names, root, ms)
        for i in ms[1:]:
            rows.append({"source": items[i][0], "shard": items[i][1], "id": items[i][2],
                         "reason": "audio_duplicate" if exact_only else "audio_near_duplicate",
                         "detail": row["cluster"]})
        clusters.append({**row, "kind": "exact" if exact_only else "near",
                         "max_ber": max((worst[e] for e in es), default=0.0)})
    return rows, pa.Table.from_pylist(clusters, schema=CLUSTERS)


class AudioNearPhase(CorpusPhase):
    name = "audio_near"
    step = "exact_dedup"
    tables = {"audio_clusters": pa.schema([("run", pa.string()), *CLUSTERS])}

    def applies(self, recipe) -> bool:
        return any(s.modality == "audio" for s in recipe.sources)

    def covers(self, src) -> bool:
        return src.modality == "audio"

    def plan(self, ctx: PlanContext) -> list[list[Node]]:
        r = ctx.loaded.recipe
        process = [n for n in ctx.process if self.covers(ctx.source(n.source))]
        ber = {s.name: s.audio_settings().near_dup_ber for s in r.sources if self.covers(s)}
        exact = r.dedup.exact is not None
        node = Node("audio_near", None, None, fingerprint(
            {"v": CODE_EPOCH, "phase": "audio_near", "ber": ber,
             "exact": ctx.planned["exact/audio"].fingerprint if exact else None,
             "process": [[n.source, n.shard, n.fingerprint] for n in process]}),
            deps=[n.key for n in process] + (["exact/audio"] if exact else []),
            spec={"ber": ber, "exact": exact, "shards": [(n.source, n.shard) for n in process]})
        return [[node]]

    def runners(self):
        return {"audio_near": self.run}

    def run(self, out: Path, node: Node) -> dict:
        shards = [tuple(s) for s in node.spec["shards"]]
        gone = {(s, i) for s, sh in shards for i in read_drops(drops_path(out, "exact", s, sh))} \
            if node.spec["exact"] else set()
        rows, clusters = audio_duplicates(out, shards, node.spec["ber"], gone)
        path = work_dir(out, self.name) / "clusters.parquet"
        atomic_write_parquet(path, clusters)
        return {"duplicates": len(rows), "outputs": [*self.write_drops(out, shards, rows), str(path.relative_to(out))]}

    def ledger_rows(self, run: str, nodes: list[Node], markers: dict, out: Path, totals: dict) -> dict[str, list[dict]]:
        clusters = pq.read_table(work_dir(out, self.name) / "clusters.parquet").to_pylist()
        return {"audio_clusters": [{"run": run, **c} for c in clusters]}
