"""Near-duplicate text removal with MinHash-LSH, as stages joined by files under `<out>/work/minhash/`:

    signatures(source, shard)  band keys of every processed document      → sig/<source>/<shard>.npy
    band(b, p)                 the keys of band b in hash partition p (a
                               shuffle by band hash: a task holds 1/parts
                               of one band column): documents sharing a
                               bucket become edges to the bucket's first   → edges/<b>-<p>.npy
    clusters                   connected components over the documents
                               that have an edge (memory follows the
                               duplicates, not the corpus); one survivor
                               per component is kept                       → drops/, duplicates.parquet,
                                                                             clusters.parquet, params.json

Global index = position in canonical order (recipe source order, shard, row). Survivor rules
(`dedup.minhash.keep`): `earliest` keeps the component's minimum ("earliest source priority, then
shard, then row"); `highest_quality` keeps the member with the highest `score_field`, ties by that
same minimum (the scores of the clustered documents only are read from the processed shards'
metadata). Either way the result cannot depend on worker count or task completion order. With
`index:` (earlier output folders), those runs' signatures come first in that order: a new document
near one of theirs is removed, theirs are never recomputed or removed (incremental dedup), whatever
the rule. Text sources, and the joined text of interleaved image-text documents (a near-duplicate
page is removed whole; its images are deduplicated by pHash).
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import ClassVar

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from curation.core.atomic import atomic_write_json, atomic_write_parquet, save_array
from curation.core.graph import CLUSTER_COLUMNS, cluster_row, clustered_roots
from curation.core.hashing import fingerprint, sha256_file
from curation.core.layout import edges_path, processed_path, sig_path, work_dir
from curation.core.node import CODE_EPOCH, Node
from curation.corpus.base import CorpusPhase, PlanContext
from curation.corpus.stream import column_batches
from curation.errors import RecipeError
from curation.steps.text.minhash import (
    NO_SHINGLES,
    Shingler,
    band_keys,
    permutations,
    signatures_batch,
)

CLUSTER_SCHEMA = pa.schema(CLUSTER_COLUMNS)
DUPLICATES = pa.schema([("source", pa.string()), ("shard", pa.string()), ("id", pa.string()), ("cluster", pa.string())])


def run_signatures(out: Path, node: Node) -> dict:
    """Band keys of every document of one shard, its text read in batches (`curation.corpus.stream`): the
    task holds one batch of text plus the keys (8 bytes per band per document), never the shard's text."""
    spec = node.spec
    cfg, bands, rows = spec["cfg"], spec["bands"], spec["rows"]
    shingles = Shingler.cached(cfg["ngram"], cfg["language"])
    a, b = permutations(bands * rows, cfg["seed"])
    path = processed_path(out, node.source, node.shard)
    keys = np.empty((pq.ParquetFile(path).metadata.num_rows, bands), dtype=np.uint64)
    at = 0
    for cols in column_batches(path):
        full, empty = signatures_batch([shingles(t) for t in cols["text"]], a, b)   # one numpy pass per batch
        batch = band_keys(full, bands, rows)
        batch[empty] = NO_SHINGLES  # texts without shingles match nothing
        keys[at:at + len(batch)] = batch
        at += len(batch)
    sig = sig_path(out, node.source, node.shard)
    save_array(sig, keys)
    return {"documents": int(keys.shape[0]), "outputs": [str(sig.relative_to(out))]}


def corpus_shards(out: Path, shards: list[tuple[str, str]], index: list[list[str]]) -> list[tuple[Path, str, str]]:
    """(run folder, source, shard) in global order: the index runs' shards first, then this run's."""
    return [(Path(root), source, shard) for root, source, shard in index] + \
        [(out, source, shard) for source, shard in shards]


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


def run_band(out: Path, node: Node) -> dict:
    spec = node.spec
    band, part = spec["band"], spec["part"]
    shards = [tuple(s) for s in spec["shards"]]
    keys, source_idx, index = _band_partition(corpus_shards(out, shards, spec["index"]), band, part,
                                              spec["partitions"])
    groups = source_idx if spec["scope"] == "source" else np.zeros_like(source_idx)
    edges = bucket_edges(keys, groups, index)
    path = edges_path(out, band, part)
    save_array(path, edges)
    return {"edges": int(edges.shape[0]), "keys": int(keys.size), "outputs": [str(path.relative_to(out))]}


def _names(entries, n_index: int, offsets: np.ndarray, nodes: np.ndarray) -> dict[int, tuple[str, str, str]]:
    """Global index -> (source label, shard, id) for the given nodes, reading ids one shard at a time."""
    owner = np.searchsorted(offsets, nodes, side="right") - 1
    names = {}
    for e in np.unique(owner):
        root_dir, source, shard = entries[e]
        col = pq.read_table(processed_path(root_dir, source, shard), columns=["id"]).column("id")
        label = source if e >= n_index else f"index:{source}"
        for g in nodes[owner == e].tolist():
            names[g] = (label, shard, col[g - int(offsets[e])].as_py())
    return names


def _scores(entries, n_index: int, offsets: np.ndarray, nodes: np.ndarray, field: str) -> np.ndarray:
    """`meta[field]` of the given nodes of this run (earlier runs' documents: -inf, they are never
    removed), reading the `meta` column one shard at a time."""
    owner = np.searchsorted(offsets, nodes, side="right") - 1
    scores = np.full(nodes.size, -np.inf)
    for e in np.unique(owner[owner >= n_index]).tolist():
        root_dir, source, shard = entries[e]
        col = pq.read_table(processed_path(root_dir, source, shard), columns=["meta"]).column("meta")
        for j in np.flatnonzero(owner == e).tolist():
            row = int(nodes[j] - offsets[e])
            v = json.loads(col[row].as_py() or "{}").get(field)
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not np.isfinite(v):
                raise RecipeError(f"dedup.minhash.keep: highest_quality: document {row} of source {source!r} "
                                  f"(shard {shard}) has no numeric meta[{field!r}] (got {v!r}); score every text "
                                  f"source with a `quality` step writing {field!r}")
            scores[j] = float(v)
    return scores


def highest_quality(roots: np.ndarray, nodes: np.ndarray, scores: np.ndarray, indexed: int) -> np.ndarray:
    """The survivor of each node's component: the highest score, then the smallest global index (earliest
    source, shard, row); a component holding an earlier run's document keeps that one (its minimum)."""
    order = np.lexsort((nodes, -scores, roots))            # by component, best first
    first = np.r_[True, roots[order][1:] != roots[order][:-1]]
    best = dict(zip(roots[order][first].tolist(), nodes[order][first].tolist()))
    return np.array([r if r < indexed else best[r] for r in roots.tolist()], dtype=np.int64)


def run_clusters(out: Path, node: Node, phase: MinHashPhase) -> dict:
    spec = node.spec
    shards = [tuple(s) for s in spec["shards"]]
    entries = corpus_shards(out, shards, spec["index"])
    sizes = [np.load(sig_path(root, source, shard), mmap_mode="r").shape[0] for root, source, shard in entries]
    offsets = np.concatenate([[0], np.cumsum(sizes, dtype=np.int64)])
    n_index = len(spec["index"])
    indexed = int(offsets[n_index])  # earlier runs' documents come first: never removed, only matched against
    edges = [np.load(edges_path(out, b, p)) for b in range(spec["bands"]) for p in range(spec["partitions"])]
    all_edges = np.concatenate(edges) if edges else np.zeros((0, 2), np.int64)
    nodes, roots = clustered_roots(all_edges)
    kept = roots
    if spec["cfg"]["keep"] == "highest_quality":
        kept = highest_quality(roots, nodes, _scores(entries, n_index, offsets, nodes, spec["cfg"]["score_field"]),
                               indexed)
    removed = (nodes != kept) & (nodes >= indexed)
    keep = np.isin(roots, roots[removed])  # clusters with at least one document of this run removed
    nodes, roots, kept, removed = nodes[keep], roots[keep], kept[keep], removed[keep]
    names = _names(entries, n_index, offsets, nodes)

    def name(g: int) -> str:
        return f"{names[g][0]}/{names[g][2]}"

    dup_rows = [{"source": names[g][0], "shard": names[g][1], "id": names[g][2], "cluster": name(k)}
                for g, k in zip(nodes[removed].tolist(), kept[removed].tolist())]
    members: dict[int, tuple[int, list[int]]] = {}   # component minimum -> (survivor, members ascending)
    for g, r, k in zip(nodes.tolist(), roots.tolist(), kept.tolist()):
        members.setdefault(r, (k, []))[1].append(g)
    labels = {g: (source, rid) for g, (source, _, rid) in names.items()}
    cluster_rows = [cluster_row(labels, k, m) for _, (k, m) in sorted(members.items())]
    base = work_dir(out, "minhash")
    atomic_write_parquet(base / "duplicates.parquet", pa.Table.from_pylist(dup_rows, schema=DUPLICATES))
    atomic_write_parquet(base / "clusters.parquet", pa.Table.from_pylist(cluster_rows, schema=CLUSTER_SCHEMA))
    params = {k: spec["cfg"][k] for k in ("ngram", "seed", "language")} | {"bands": spec["bands"], "rows": spec["rows"]}
    atomic_write_json(base / "params.json", params)
    drops = phase.write_drops(out, shards, [r | {"reason": "near_duplicate", "detail": r["cluster"]} for r in dup_rows])
    return {"duplicates": len(dup_rows), "clusters": len(cluster_rows), "edges": int(all_edges.shape[0]),
            "indexed": indexed, "outputs": ["work/minhash/duplicates.parquet", "work/minhash/clusters.parquet",
                                             "work/minhash/params.json", *drops]}


def index_shards(loaded, cfg, bands: int, rows: int) -> list[list[str]]:
    """The signature shards of earlier runs named in `dedup.minhash.index`, checked for matching settings."""
    want = {"ngram": cfg.ngram, "seed": cfg.seed, "language": cfg.language, "bands": bands, "rows": rows}
    shards = []
    for folder in cfg.index:
        root = loaded.resolve(folder)
        params = work_dir(root, "minhash") / "params.json"
        if not params.is_file():
            raise RecipeError(f"dedup.minhash.index: {root} holds no MinHash index (no {params.name}); name the "
                              f"output folder of a run that used dedup.minhash")
        got = json.loads(params.read_text())
        if got != want:
            raise RecipeError(f"dedup.minhash.index: {root} was built with {got}, this recipe uses {want}; "
                              f"the settings must match")
        for sig in sorted((work_dir(root, "minhash") / "sig").glob("*/*.npy")):
            shards.append([str(root), sig.parent.name, sig.stem])
    return shards


class MinHashPhase(CorpusPhase):
    name = "minhash"
    step = "near_dedup"
    tables: ClassVar[dict[str, pa.Schema]] = {"clusters": pa.schema([("run", pa.string()), *CLUSTER_COLUMNS]),
              "near_duplicates": pa.schema([("run", pa.string()), ("source", pa.string()), ("id", pa.string()),
                                            ("cluster", pa.string())])}

    def applies(self, recipe) -> bool:
        return recipe.dedup.minhash is not None

    def covers(self, src) -> bool:
        return src.modality in ("text", "interleaved")

    def plan(self, ctx: PlanContext) -> list[list[Node]]:
        cfg = ctx.loaded.recipe.dedup.minhash
        n_bands, rows = cfg.lsh()
        index = index_shards(ctx.loaded, cfg, n_bands, rows)
        index_fp = [sha256_file(sig_path(Path(root), s, sh)) for root, s, sh in index]
        process = [n for n in ctx.process if self.covers(ctx.source(n.source))]
        shards = [(n.source, n.shard) for n in process]
        common = {"cfg": cfg.model_dump(mode="json"), "bands": n_bands, "rows": rows, "index": index}
        sig_cfg = {"ngram": cfg.ngram, "seed": cfg.seed, "bands": n_bands, "rows": rows, "language": cfg.language}
        signatures = [Node("signatures", p.source, p.shard, fingerprint(
            {"v": CODE_EPOCH, "phase": "signatures", "cfg": sig_cfg, "process": p.fingerprint}),
            deps=[p.key], spec=common) for p in process]
        sigs = [[n.source, n.shard, n.fingerprint] for n in signatures] + index_fp
        band_spec = {**common, "partitions": cfg.partitions, "scope": cfg.scope, "shards": shards}
        bands = [Node("band", None, f"{b:03d}-{p:03d}", fingerprint(
            {"v": CODE_EPOCH, "phase": "band", "band": b, "part": p, "parts": cfg.partitions, "scope": cfg.scope,
             "sigs": sigs}), deps=[n.key for n in signatures], spec={**band_spec, "band": b, "part": p})
                 for b in range(n_bands) for p in range(cfg.partitions)]
        survivor = {} if cfg.keep == "earliest" else {"keep": cfg.keep, "score_field": cfg.score_field}
        clusters = Node("clusters", None, None, fingerprint(
            {"v": CODE_EPOCH, "phase": "clusters", "bands": [n.fingerprint for n in bands], **survivor}),
            deps=[n.key for n in bands + signatures + process], spec=band_spec)   # edges, sizes, ids and scores
        return [signatures, bands, [clusters]]

    def node_count(self, recipe, files: dict[str, int]) -> int:
        cfg = recipe.dedup.minhash   # signatures per shard, bands × partitions, one clustering
        return self.covered_files(recipe, files) + cfg.lsh()[0] * cfg.partitions + 1

    def runners(self):
        return {"signatures": run_signatures, "band": run_band,
                "clusters": lambda out, node: run_clusters(out, node, self)}

    def ledger_rows(self, run: str, nodes: list[Node], markers: dict, out: Path, totals: dict) -> dict[str, list[dict]]:
        base = work_dir(out, "minhash")
        return {"clusters": [{"run": run, **c} for c in pq.read_table(base / "clusters.parquet").to_pylist()],
                "near_duplicates": [{"run": run, "source": d["source"], "id": d["id"], "cluster": d["cluster"]}
                                    for d in pq.read_table(base / "duplicates.parquet").to_pylist()]}

    def explain(self, nodes: list[Node]) -> str:
        cfg = nodes[-1].spec["cfg"]
        b, rows = nodes[-1].spec["bands"], nodes[-1].spec["rows"]
        n_sig = sum(n.phase == "signatures" for n in nodes)
        n_band = sum(n.phase == "band" for n in nodes)
        return (f"MinHash {cfg['ngram']}-grams, {b} bands × {rows} rows, {cfg['scope']}: {n_sig} signature tasks → "
                f"{n_band} band tasks → clusters (keep {cfg['keep']}) {nodes[-1].fingerprint}")
