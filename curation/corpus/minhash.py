"""Near-duplicate text removal with MinHash-LSH, as stages joined by files under `<out>/work/minhash/`:

    signatures(source, shard)  band keys of every processed document,
                               band-major, each band by partition (`curation.
                               corpus.minhash_sig`)                         → sig/<source>/<shard>.bands
    band(b, p)                 the keys of band b in hash partition p (a
                               shuffle by band hash: a task reads and holds
                               1/parts of one band column, its slice of
                               each shard): documents sharing a bucket
                               become edges to the bucket's first           → edges/<b>-<p>.npy
    cc_scatter, cc_round,      connected components over the documents
    cc_settle, cc_resolve      that have an edge, in `partitions` hash
                               partitions of the documents (each task holds
                               about 1/parts of the edges); one survivor
                               per component is kept                       → work/minhash/cc/
    clusters                   the resolved parts, assembled               → drops/, duplicates.parquet,
                                                                             clusters.parquet, params.json
    (`curation.corpus.minhash_cc`)

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
from functools import partial
from pathlib import Path
from typing import ClassVar

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

import curation.recipe.registry as registry
from curation.core.atomic import save_array
from curation.core.graph import CLUSTER_COLUMNS
from curation.core.hashing import Encoded, fingerprint, sha256_file
from curation.core.layout import edges_path, processed_path, sig_path, work_dir
from curation.core.node import CODE_EPOCH, Node
from curation.core.parts import PartRows
from curation.corpus.base import CorpusPhase, PlanContext, processed_columns
from curation.corpus.cc_files import round_reads
from curation.corpus.minhash_cc import (
    CC_ROUNDS,
    corpus_shards,
    highest_quality,  # noqa: F401 (the survivor rule, tested through this module)
    run_clusters,
    run_resolve,
    run_round,
    run_scatter,
    run_settle,
)
from curation.corpus.minhash_sig import (
    LAYOUT,
    band_pieces,
    header,
    header_pieces,
    read_band,
    read_keys,
    sig_file,
    write_signatures,
)
from curation.corpus.partition import auto_partitions
from curation.corpus.stream import column_batches
from curation.errors import RecipeError
from curation.steps.text.minhash import (
    NO_SHINGLES,
    Shingler,
    band_keys,
    permutations,
    signatures_batch,
)


def run_signatures(out: Path, node: Node) -> dict:
    """Band keys of every document of one shard, its text read in batches (`curation.corpus.stream`): the
    task holds one batch of text plus the keys (8 bytes per band per document), never the shard's text.
    Written band-major for the plan's partitions; when the file there holds the same keys laid out for
    another partition count (`partitions` changed), they are re-laid out instead of recomputed."""
    spec = node.spec
    sig = sig_path(out, node.source, node.shard)
    found = header(sig) if sig.is_file() else None
    if found is not None and found[0] == spec["keys"]:
        keys = read_keys(sig)
    else:
        keys = _signatures(out, node)
    write_signatures(sig, keys, spec["partitions"], spec["keys"])
    return {"documents": int(keys.shape[0]), "outputs": [str(sig.relative_to(out))]}


def _signatures(out: Path, node: Node) -> np.ndarray:
    spec = node.spec
    cfg, bands, rows = spec["cfg"], spec["bands"], spec["rows"]
    shingles = Shingler.cached(cfg["ngram"], cfg["language"])
    a, b = permutations(bands * rows, cfg["seed"])
    path = processed_path(out, node.source, node.shard)
    keys = np.empty((pq.ParquetFile(path).metadata.num_rows, bands), dtype=np.uint64)
    at = 0
    for cols in column_batches(path):
        full, empty = signatures_batch([shingles.hashes(t) for t in cols["text"]], a, b)   # one numpy pass a batch
        batch = band_keys(full, bands, rows)
        batch[empty] = NO_SHINGLES  # texts without shingles match nothing
        keys[at:at + len(batch)] = batch
        at += len(batch)
    return keys


def _band_partition(entries: list[tuple[Path, str, str]], band: int, part: int,
                    parts: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(keys, source number, global index) of one band's keys that fall in hash partition `part`.

    Each shard's slice is read with `os.pread` (`curation.corpus.minhash_sig.read_band`), one shard at a
    time, so a task reads and holds 1/parts of one band column."""
    keys, source_idx, index, names, offset = [], [], [], [], 0
    for root, source, shard in entries:
        col, rows, n = read_band(sig_file(root, source, shard), band, part, parts)
        if source not in names:
            names.append(source)
        keys.append(col)
        source_idx.append(np.full(rows.size, names.index(source), dtype=np.int32))
        index.append(rows + offset)
        offset += n
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
        found = {(p.parent.name, p.stem) for ext in ("bands", "npy")   # band-major, or an earlier version's
                 for p in (work_dir(root, "minhash") / "sig").glob(f"*/*.{ext}")}
        shards += [[str(root), source, shard] for source, shard in sorted(found, key=lambda s: (s[0], f"{s[1]}.npy"))]
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
        return registry.modality(src.modality).minhash   # text and interleaved documents (their declarations)

    def plan(self, ctx: PlanContext) -> list[list[Node]]:
        cfg = ctx.loaded.recipe.dedup.minhash
        n_bands, rows = cfg.lsh()
        process = [n for n in ctx.process if self.covers(ctx.source(n.source))]
        parts = cfg.partitions or auto_partitions(len(process))
        index = index_shards(ctx.loaded, cfg, n_bands, rows)
        index_fp = [sha256_file(sig_file(Path(root), s, sh)) for root, s, sh in index]
        shards = [(n.source, n.shard) for n in process]
        common = {"cfg": cfg.model_dump(mode="json"), "bands": n_bands, "rows": rows, "index": index}
        sig_cfg = {"ngram": cfg.ngram, "seed": cfg.seed, "bands": n_bands, "rows": rows, "language": cfg.language}
        # what the keys are (the band tasks' identity of their input, as before the band-major layout), and
        # how this run lays them out: the signatures node's fingerprint covers both
        keys = [fingerprint({"v": CODE_EPOCH, "phase": "signatures", "cfg": sig_cfg, "process": p.fingerprint})
                for p in process]
        signatures = [Node("signatures", p.source, p.shard, fingerprint(
            {"keys": k, "layout": LAYOUT, "partitions": parts}), deps=[p.key],
            spec={**common, "partitions": parts, "keys": k}) for p, k in zip(process, keys)]
        # encoded once for every band task's fingerprint (each lists every shard: shards × bands × partitions)
        sigs = Encoded([[n.source, n.shard, k] for n, k in zip(signatures, keys)] + index_fp)
        band_spec = {**common, "partitions": parts, "scope": cfg.scope, "shards": shards}
        sig_keys = [n.key for n in signatures]   # one list, shared by every band task (each reads every shard)
        bands = [Node("band", None, f"{b:03d}-{p:03d}", fingerprint(
            {"v": CODE_EPOCH, "phase": "band", "band": b, "part": p, "parts": parts, "scope": cfg.scope,
             "sigs": sigs}), deps=sig_keys, spec={**band_spec, "band": b, "part": p})
                 for b in range(n_bands) for p in range(parts)]
        stages = [signatures, bands, *self.plan_clusters(cfg, band_spec, bands, signatures, process)]
        return stages

    @staticmethod
    def plan_clusters(cfg, band_spec: dict, bands: list[Node], signatures: list[Node],
                      process: list[Node]) -> list[list[Node]]:
        """The clustering stages (`curation.corpus.minhash_cc`): scatter, CC_ROUNDS rounds and a settle task
        over the band tasks' hash partitions, one resolve task per global-index range, then `clusters`."""
        parts = band_spec["partitions"]
        survivor = {} if cfg.keep == "earliest" else {"keep": cfg.keep, "score_field": cfg.score_field}
        fp = lambda what: fingerprint({"v": CODE_EPOCH, **what})  # noqa: E731
        bands_fp = Encoded([n.fingerprint for n in bands])
        band_keys = [n.key for n in bands]   # deps lists shared by the sibling tasks that read the same files
        scatter = [Node("cc_scatter", None, f"{q:03d}", fp({"phase": "cc_scatter", "part": q, "parts": parts,
                                                           "bands": bands_fp}),
                        deps=band_keys, spec={**band_spec, "part": q}) for q in range(parts)]
        rounds, prev = [], scatter
        for r in range(1, CC_ROUNDS + 1):   # a round reads every partition's previous round and its own edges
            prev_fp = Encoded([n.fingerprint for n in prev])
            prev = [Node("cc_round", None, f"{r:03d}-{q:03d}", fp({"phase": "cc_round", "round": r, "part": q,
                                                                    "prev": prev_fp,
                                                                    "edges": scatter[q].fingerprint}),
                         deps=sorted({n.key for n in prev} | {scatter[q].key}),
                         spec={"round": r, "part": q, "partitions": parts}) for q in range(parts)]
            rounds.append(prev)
        settle = Node("cc_settle", None, None, fp({"phase": "cc_settle", "rounds": [n.fingerprint for n in prev]}),
                      deps=[n.key for n in prev + scatter], spec={"rounds": CC_ROUNDS, "partitions": parts})
        resolve_deps = [n.key for n in [settle, *prev, *signatures, *process]]   # labels, sizes, ids, scores
        resolve = [Node("cc_resolve", None, f"{q:03d}", fp({"phase": "cc_resolve", "part": q,
                                                           "settle": settle.fingerprint, **survivor}),
                        deps=resolve_deps, spec={**band_spec, "part": q}) for q in range(parts)]
        # what it writes is a function of the band edges and the survivor rule alone, however many partitions
        # cluster them, so its fingerprint covers exactly those (as when one task clustered every edge)
        clusters = Node("clusters", None, None, fp({"phase": "clusters", "bands": bands_fp, **survivor}),
                        deps=[n.key for n in resolve], spec=band_spec)
        return [scatter, *rounds, [settle], resolve, [clusters]]

    def node_count(self, recipe, files: dict[str, int]) -> int:
        cfg = recipe.dedup.minhash   # signatures per shard, bands × partitions, then per partition a scatter,
        shards = self.covered_files(recipe, files)   # CC_ROUNDS rounds and a resolve; the settle and clusters
        parts = cfg.partitions or auto_partitions(shards)
        return shards + cfg.lsh()[0] * parts + parts * (CC_ROUNDS + 2) + 2

    def runners(self):
        return {"signatures": run_signatures, "band": run_band, "cc_scatter": run_scatter, "cc_round": run_round,
                "cc_settle": run_settle, "cc_resolve": run_resolve,
                "clusters": lambda out, node: run_clusters(out, node, self)}

    def partial_reads(self):
        # a band task reads one band's partition of each signature file; a resolve task the header of each,
        # and the ids (scores: `meta`) of the processed shards, not their text
        def band(node: Node, rel: str):
            s = node.spec
            pieces = partial(band_pieces, band=s["band"], part=s["part"], parts=s["partitions"])
            return (lambda remote, rel, local: remote.get_pieces(rel, local, pieces)) if rel.endswith(".bands") \
                else None

        def resolve(node: Node, rel: str):
            if rel.endswith(".bands"):
                return lambda remote, rel, local: remote.get_pieces(rel, local, header_pieces)
            columns = ["id", "meta"] if node.spec["cfg"]["keep"] == "highest_quality" else ["id"]
            return processed_columns(rel, columns)
        return {"band": band, "cc_round": round_reads, "cc_resolve": resolve}

    def ledger_rows(self, run: str, nodes: list[Node], markers: dict, out: Path, totals: dict) -> dict[str, list[dict]]:
        # the clusters task's files, copied into the ledger by DuckDB: the driver holds none of their rows
        base = work_dir(out, "minhash")
        return {name: PartRows([base / f"{part}.parquet"], self.tables[name].names, {"run": run})
                for name, part in (("clusters", "clusters"), ("near_duplicates", "duplicates"))}

    def explain(self, nodes: list[Node]) -> str:
        cfg = nodes[-1].spec["cfg"]
        b, rows = nodes[-1].spec["bands"], nodes[-1].spec["rows"]
        n_sig = sum(n.phase == "signatures" for n in nodes)
        n_band = sum(n.phase == "band" for n in nodes)
        n_cc = sum(n.phase.startswith("cc_") for n in nodes)
        return (f"MinHash {cfg['ngram']}-grams, {b} bands × {rows} rows, {cfg['scope']}: {n_sig} signature tasks → "
                f"{n_band} band tasks → {n_cc} partitioned clustering tasks → clusters (keep {cfg['keep']}) "
                f"{nodes[-1].fingerprint}")
