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

from curation.core.graph import CLUSTER_COLUMNS, cluster_row, components, groups
from curation.core.layout import processed_path
from curation.corpus.near import NearDuplicatePhase
from curation.steps.audio.declaration import audio_settings
from curation.steps.audio.fingerprint import near_duplicates

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


class AudioNearPhase(NearDuplicatePhase):
    name = "audio_near"
    modalities = ("audio",)
    table = "audio_clusters"
    clusters = CLUSTERS

    def settings(self, recipe) -> dict:
        return {"ber": {s.name: audio_settings(s).near_dup_ber for s in recipe.sources if self.covers(s)}}

    def find(self, out: Path, shards: list[tuple[str, str]], settings: dict, gone: set):
        return audio_duplicates(out, shards, settings["ber"], gone)
