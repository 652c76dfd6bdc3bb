"""The near-duplicate phases, joined by files under `<out>/work/minhash/`:

    signatures(source, shard)  band keys of every processed document      → sig/<source>/<shard>.npy
    band(b)                    one band's keys over the corpus (one column,
                               not the whole corpus): documents sharing a
                               bucket become edges to the bucket's first   → edges/<b>.npy
    clusters                   connected components of all edges by
                               min-label propagation (memory O(documents
                               + edges)); the smallest global index of a
                               component is kept                          → duplicates.parquet, clusters.parquet

Global index = position in canonical order (recipe source order, shard, row), so the survivor rule
"earliest source priority, then shard, then row" is simply the component's minimum, and the result
cannot depend on worker count or task completion order. With `index:` (earlier output folders), those
runs' signatures come first in that order: a new document near one of theirs is removed, theirs are
never recomputed or removed (incremental dedup).
"""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from curation.runtime.files import atomic_write_parquet, write_marker
from curation.runtime.tasks import processed_path
from curation.sampling import save_array
from curation.steps.minhash import band_keys, permutations, shingle_hashes, signature


def sig_path(out: Path, source: str, shard: str) -> Path:
    return out / "work" / "minhash" / "sig" / source / f"{shard}.npy"


def edges_path(out: Path, band: int) -> Path:
    return out / "work" / "minhash" / "edges" / f"{band:03d}.npy"


def _signer(cfg: dict, bands: int, rows: int):
    """text -> signature array, with curate's hashing or datatrove's own (`hashing:` in the recipe)."""
    if cfg["hashing"] == "datatrove":
        import tempfile

        from datatrove.pipeline.dedup import MinhashDedupSignature
        from datatrove.pipeline.dedup.minhash import MinhashConfig

        dt = MinhashDedupSignature(tempfile.gettempdir(), language=cfg["language"], config=MinhashConfig(
            n_grams=cfg["ngram"], num_buckets=bands, hashes_per_bucket=rows, seed=cfg["seed"]))
        empty = np.full(bands * rows, np.iinfo(np.uint64).max, dtype=np.uint64)

        def sign(text: str) -> np.ndarray:
            shingles = dt.get_shingles(text)
            if shingles.size == 0:  # fewer words than the n-gram size: datatrove's signature would fail
                return empty
            return np.asarray(sum(dt.get_signature(shingles), []), dtype=np.uint64)
        return sign
    a, b = permutations(bands * rows, cfg["seed"])
    return lambda text: signature(shingle_hashes(text, cfg["ngram"]), a, b)


def run_signatures(out: str, key: str, fingerprint: str, spec: dict) -> dict:
    out_dir = Path(out)
    cfg = spec["cfg"]
    bands, rows = spec["bands"], spec["rows"]
    sign = _signer(cfg, bands, rows)
    texts = pq.read_table(processed_path(out_dir, spec["source"], spec["shard"]), columns=["text"])
    sigs = np.stack([sign(t) for t in texts.column("text").to_pylist()]) \
        if texts.num_rows else np.zeros((0, bands * rows), dtype=np.uint32)
    keys = band_keys(sigs, bands, rows)
    keys[(sigs == np.iinfo(sigs.dtype).max).all(axis=1)] = NO_SHINGLES  # texts without shingles match nothing
    path = sig_path(out_dir, spec["source"], spec["shard"])
    save_array(path, keys)
    return write_marker(out_dir, key, fingerprint, {"documents": texts.num_rows,
                                                     "outputs": [str(path.relative_to(out_dir))]})


def corpus_shards(out_dir: Path, shards: list[tuple[str, str]], index: list[list[str]]) -> list[tuple[Path, str, str]]:
    """(run folder, source, shard) in global order: the index runs' shards first, then this run's."""
    return [(Path(root), source, shard) for root, source, shard in index] + \
        [(out_dir, source, shard) for source, shard in shards]


def _band_column(entries: list[tuple[Path, str, str]], band: int) -> tuple[np.ndarray, np.ndarray]:
    keys, source_idx, names = [], [], []
    for root, source, shard in entries:
        col = np.load(sig_path(root, source, shard), mmap_mode="r")[:, band]
        if source not in names:
            names.append(source)
        keys.append(np.asarray(col))
        source_idx.append(np.full(col.shape[0], names.index(source), dtype=np.int32))
    if not keys:
        return np.zeros(0, np.uint64), np.zeros(0, np.int32)
    return np.concatenate(keys), np.concatenate(source_idx)


NO_SHINGLES = np.uint64(0)  # band key of a text too short to shingle; never a bucket


def bucket_edges(keys: np.ndarray, groups: np.ndarray) -> np.ndarray:
    """Edges (first, other) between documents with the same (group, key); first = smallest index."""
    idx = np.arange(keys.size, dtype=np.int64)
    order = np.lexsort((idx, keys, groups))
    order = order[keys[order] != NO_SHINGLES]
    k, g = keys[order], groups[order]
    new_run = np.ones(order.size, dtype=bool)
    new_run[1:] = (k[1:] != k[:-1]) | (g[1:] != g[:-1])
    run_start = np.maximum.accumulate(np.where(new_run, np.arange(order.size), 0))
    members = ~new_run
    return np.stack([order[run_start[members]], order[members]], axis=1).astype(np.int64)


def run_band(out: str, key: str, fingerprint: str, spec: dict, shards: list[tuple[str, str]]) -> dict:
    out_dir = Path(out)
    keys, source_idx = _band_column(corpus_shards(out_dir, shards, spec["index"]), spec["band"])
    groups = source_idx if spec["scope"] == "source" else np.zeros_like(source_idx)
    edges = bucket_edges(keys, groups)
    path = edges_path(out_dir, spec["band"])
    save_array(path, edges)
    return write_marker(out_dir, key, fingerprint, {"edges": int(edges.shape[0]),
                                                     "outputs": [str(path.relative_to(out_dir))]})


def components(n: int, edges: np.ndarray) -> np.ndarray:
    """Label of every node = the smallest node index in its connected component."""
    labels = np.arange(n, dtype=np.int64)
    if edges.size == 0:
        return labels
    u, v = edges[:, 0], edges[:, 1]
    while True:
        m = np.minimum(labels[u], labels[v])
        before = labels.copy()
        np.minimum.at(labels, u, m)
        np.minimum.at(labels, v, m)
        while True:  # pointer jumping: follow labels to their roots
            nxt = labels[labels]
            if (nxt == labels).all():
                break
            labels = nxt
        if (labels == before).all():
            return labels


def run_clusters(out: str, key: str, fingerprint: str, spec: dict, shards: list[tuple[str, str]]) -> dict:
    out_dir = Path(out)
    ids, sources, shard_of = [], [], []
    indexed = 0  # documents of earlier runs come first: they are never removed, only matched against
    for root, source, shard in corpus_shards(out_dir, shards, spec["index"]):
        col = pq.read_table(processed_path(root, source, shard), columns=["id"]).column("id").to_pylist()
        label = source if root == out_dir else f"index:{source}"
        indexed += len(col) if root != out_dir else 0
        ids += col
        sources += [label] * len(col)
        shard_of += [shard] * len(col)
    edges = [np.load(edges_path(out_dir, b)) for b in range(spec["bands"])]
    all_edges = np.concatenate(edges) if edges else np.zeros((0, 2), np.int64)
    labels = components(len(ids), all_edges)
    dup_rows, members = [], {}
    for i in np.flatnonzero(labels != np.arange(len(ids))):
        if i < indexed:
            continue
        root = int(labels[i])
        dup_rows.append({"source": sources[i], "shard": shard_of[i], "id": ids[i],
                         "cluster": f"{sources[root]}/{ids[root]}"})
        members.setdefault(root, [root]).append(int(i))
    cluster_rows = [{"cluster": f"{sources[r]}/{ids[r]}", "kept_source": sources[r], "kept_id": ids[r],
                     "size": len(m), "members": [f"{sources[j]}/{ids[j]}" for j in m],
                     "sources": sorted({sources[j] for j in m})} for r, m in sorted(members.items())]
    base = out_dir / "work" / "minhash"
    atomic_write_parquet(base / "duplicates.parquet", pa.Table.from_pylist(dup_rows, schema=pa.schema(
        [("source", pa.string()), ("shard", pa.string()), ("id", pa.string()), ("cluster", pa.string())])))
    atomic_write_parquet(base / "clusters.parquet", pa.Table.from_pylist(cluster_rows, schema=CLUSTER_SCHEMA))
    params = {k: spec["cfg"][k] for k in ("ngram", "seed", "hashing", "language")} | \
        {"bands": spec["bands"], "rows": spec["rows"]}
    (base / "params.json").write_text(json.dumps(params, sort_keys=True) + "\n")
    return write_marker(out_dir, key, fingerprint, {
        "duplicates": len(dup_rows), "clusters": len(cluster_rows), "edges": int(all_edges.shape[0]),
        "indexed": indexed,
        "outputs": ["work/minhash/duplicates.parquet", "work/minhash/clusters.parquet", "work/minhash/params.json"]})


CLUSTER_SCHEMA = pa.schema([("cluster", pa.string()), ("kept_source", pa.string()), ("kept_id", pa.string()),
                            ("size", pa.int64()), ("members", pa.list_(pa.string())),
                            ("sources", pa.list_(pa.string()))])
