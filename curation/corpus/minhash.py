"""The near-duplicate phases, joined by files under `<out>/work/minhash/`:

    signatures(source, shard)  band keys of every processed document      → sig/<source>/<shard>.npy
    band(b, p)                 the keys of band b in hash partition p (a
                               shuffle by band hash: a task holds 1/parts
                               of one band column): documents sharing a
                               bucket become edges to the bucket's first   → edges/<b>-<p>.npy
    clusters                   connected components over the documents
                               that have an edge (memory follows the
                               duplicates, not the corpus); the smallest
                               global index of a component is kept        → duplicates.parquet, clusters.parquet

Global index = position in canonical order (recipe source order, shard, row), so the survivor rule
"earliest source priority, then shard, then row" is simply the component's minimum, and the result
cannot depend on worker count or task completion order. With `index:` (earlier output folders), those
runs' signatures come first in that order: a new document near one of theirs is removed, theirs are
never recomputed or removed (incremental dedup).
"""
from __future__ import annotations

import json
from functools import lru_cache
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from curation.core.atomic import atomic_write_parquet, save_array
from curation.core.graph import clustered_roots
from curation.core.layout import edges_path, processed_path, sig_path
from curation.core.markers import write_marker
from curation.steps.text.minhash import (
    NO_SHINGLES,
    Shingler,
    band_keys,
    permutations,
    signature,
)


@lru_cache(maxsize=2)
def _shingler(ngram: int, language: str) -> Shingler:
    """One per worker process: its word memo carries over from shard to shard (a pure cache)."""
    return Shingler(ngram, language)


def run_signatures(out: str, key: str, fingerprint: str, spec: dict) -> dict:
    out_dir = Path(out)
    cfg = spec["cfg"]
    bands, rows = spec["bands"], spec["rows"]
    shingles = _shingler(cfg["ngram"], cfg["language"])
    a, b = permutations(bands * rows, cfg["seed"])
    texts = pq.read_table(processed_path(out_dir, spec["source"], spec["shard"]), columns=["text"])
    sigs = [signature(shingles(t), a, b) for t in texts.column("text").to_pylist()]
    empty = [s is None for s in sigs]
    full = np.zeros((len(sigs), bands * rows), dtype=np.uint64)
    for i, sig in enumerate(sigs):
        if sig is not None:
            full[i] = sig
    keys = band_keys(full, bands, rows)
    keys[empty] = NO_SHINGLES  # texts without shingles match nothing
    path = sig_path(out_dir, spec["source"], spec["shard"])
    save_array(path, keys)
    return write_marker(out_dir, key, fingerprint, {"documents": texts.num_rows,
                                                     "outputs": [str(path.relative_to(out_dir))]})


def corpus_shards(out_dir: Path, shards: list[tuple[str, str]], index: list[list[str]]) -> list[tuple[Path, str, str]]:
    """(run folder, source, shard) in global order: the index runs' shards first, then this run's."""
    return [(Path(root), source, shard) for root, source, shard in index] + \
        [(out_dir, source, shard) for source, shard in shards]


def _band_partition(entries: list[tuple[Path, str, str]], band: int, part: int,
                    parts: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(keys, source number, global index) of one band's keys that fall in hash partition `part`.

    Shards are read one at a time (memory-mapped), so a task holds 1/parts of one band column."""
    keys, source_idx, index, names, offset = [], [], [], [], 0
    for root, source, shard in entries:
        col = np.asarray(np.load(sig_path(root, source, shard), mmap_mode="r")[:, band])
        if source not in names:
            names.append(source)
        mine = np.flatnonzero(col % np.uint64(parts) == part) if parts > 1 else np.arange(col.size)
        keys.append(col[mine])
        source_idx.append(np.full(mine.size, names.index(source), dtype=np.int32))
        index.append(mine + offset)
        offset += col.size
    if not keys:
        return np.zeros(0, np.uint64), np.zeros(0, np.int32), np.zeros(0, np.int64)
    return np.concatenate(keys), np.concatenate(source_idx), np.concatenate(index).astype(np.int64)


def bucket_edges(keys: np.ndarray, groups: np.ndarray, index: np.ndarray | None = None) -> np.ndarray:
    """Edges (first, other) between documents with the same (group, key); first = smallest index.

    `index` gives each key's global document index (default: its position)."""
    idx = np.arange(keys.size, dtype=np.int64) if index is None else index
    order = np.lexsort((idx, keys, groups))
    order = order[keys[order] != NO_SHINGLES]
    k, g = keys[order], groups[order]
    new_run = np.ones(order.size, dtype=bool)
    new_run[1:] = (k[1:] != k[:-1]) | (g[1:] != g[:-1])
    run_start = np.maximum.accumulate(np.where(new_run, np.arange(order.size), 0))
    members = ~new_run
    return np.stack([idx[order[run_start[members]]], idx[order[members]]], axis=1).astype(np.int64)


def run_band(out: str, key: str, fingerprint: str, spec: dict, shards: list[tuple[str, str]]) -> dict:
    out_dir = Path(out)
    band, part = spec["band"], spec["part"]
    keys, source_idx, index = _band_partition(corpus_shards(out_dir, shards, spec["index"]), band, part,
                                              spec["partitions"])
    groups = source_idx if spec["scope"] == "source" else np.zeros_like(source_idx)
    edges = bucket_edges(keys, groups, index)
    path = edges_path(out_dir, band, part)
    save_array(path, edges)
    return write_marker(out_dir, key, fingerprint, {"edges": int(edges.shape[0]), "keys": int(keys.size),
                                                     "outputs": [str(path.relative_to(out_dir))]})


def run_clusters(out: str, key: str, fingerprint: str, spec: dict, shards: list[tuple[str, str]]) -> dict:
    out_dir = Path(out)
    entries = corpus_shards(out_dir, shards, spec["index"])
    sizes = [np.load(sig_path(root, source, shard), mmap_mode="r").shape[0] for root, source, shard in entries]
    offsets = np.concatenate([[0], np.cumsum(sizes, dtype=np.int64)])
    n_index = len(spec["index"])
    indexed = int(offsets[n_index])  # earlier runs' documents come first: never removed, only matched against
    edges = [np.load(edges_path(out_dir, b, p)) for b in range(spec["bands"]) for p in range(spec["partitions"])]
    all_edges = np.concatenate(edges) if edges else np.zeros((0, 2), np.int64)
    nodes, roots = clustered_roots(all_edges)
    removed = (nodes != roots) & (nodes >= indexed)
    keep = np.isin(roots, roots[removed])  # clusters with at least one document of this run removed
    nodes, roots, removed = nodes[keep], roots[keep], removed[keep]
    owner = np.searchsorted(offsets, nodes, side="right") - 1
    names = {}
    for e in np.unique(owner):
        root_dir, source, shard = entries[e]
        col = pq.read_table(processed_path(root_dir, source, shard), columns=["id"]).column("id")
        label = source if e >= n_index else f"index:{source}"
        for g in nodes[owner == e].tolist():
            names[g] = (label, shard, col[g - int(offsets[e])].as_py())

    def name(g: int) -> str:
        return f"{names[g][0]}/{names[g][2]}"

    dup_rows = [{"source": names[g][0], "shard": names[g][1], "id": names[g][2], "cluster": name(r)}
                for g, r in zip(nodes[removed].tolist(), roots[removed].tolist())]
    members: dict[int, list[int]] = {}
    for g, r in zip(nodes.tolist(), roots.tolist()):
        members.setdefault(r, []).append(g)
    cluster_rows = [{"cluster": name(r), "kept_source": names[r][0], "kept_id": names[r][2],
                     "size": len(m), "members": [name(j) for j in m],
                     "sources": sorted({names[j][0] for j in m})} for r, m in sorted(members.items())]
    base = out_dir / "work" / "minhash"
    atomic_write_parquet(base / "duplicates.parquet", pa.Table.from_pylist(dup_rows, schema=pa.schema(
        [("source", pa.string()), ("shard", pa.string()), ("id", pa.string()), ("cluster", pa.string())])))
    atomic_write_parquet(base / "clusters.parquet", pa.Table.from_pylist(cluster_rows, schema=CLUSTER_SCHEMA))
    params = {k: spec["cfg"][k] for k in ("ngram", "seed", "language")} | \
        {"bands": spec["bands"], "rows": spec["rows"]}
    (base / "params.json").write_text(json.dumps(params, sort_keys=True) + "\n")
    return write_marker(out_dir, key, fingerprint, {
        "duplicates": len(dup_rows), "clusters": len(cluster_rows), "edges": int(all_edges.shape[0]),
        "indexed": indexed,
        "outputs": ["work/minhash/duplicates.parquet", "work/minhash/clusters.parquet", "work/minhash/params.json"]})


CLUSTER_SCHEMA = pa.schema([("cluster", pa.string()), ("kept_source", pa.string()), ("kept_id", pa.string()),
                            ("size", pa.int64()), ("members", pa.list_(pa.string())),
                            ("sources", pa.list_(pa.string()))])
