"""Exact (content-hash) and URL dedup, partitioned by hash range like the MinHash bands.

While processing, every surviving record gets `content_hash` (`curation.core.hashing.content_hash`
of its normalised text, of an image's bytes; the PCM hash of a clip). Every later copy of a hash is a
duplicate of the first (`exact_duplicate`); with `dedup.exact.url`, every later record with the same
normalised URL is a re-crawl of the first (`url_duplicate`). With `scope: source` the first copy is
looked for within the same source only. Hashes are compared within one modality: an image's bytes and
a document's text share no meaning. The survivor rule, exactly: in canonical order, a record is kept
when none of its keys belongs to an earlier kept record (`curation.corpus.partition`).

Stages, joined by files under `<out>/work/exact/`:

    exact_keys(source, shard)   content and URL keys of the shard's records,
                                read in batches, sorted by key                → keys/<source>/<shard>.npy
    exact_part(modality, p)     hash range p of every shard's keys (a slice
                                of each, memory-mapped): the keys that repeat → parts/<modality>/<p>.npy
    exact_scatter, exact_round, the connected components of the graph of
    exact_settle, exact_resolve documents and their repeated keys, in hash
                                partitions; the survivor rule per component   → cc/<modality>/
    exact(modality)             the resolved parts, shard by shard: one drop
                                list per shard                                → drops/
    (`curation.corpus.exact_cc`)

A part task holds 1/partitions of the modality's keys (40 bytes per record and URL); a component task
about 1/partitions of the repeated-key rows (memory follows the duplicates, as in MinHash clustering),
and the assembly one shard's duplicates at a time. The same `partitions` (default: one per 16 input shards
of the modality, at most 1024: `curation.corpus.partition.auto_partitions`) sets both.
"""
from __future__ import annotations

import json
from functools import partial
from pathlib import Path

import numpy as np

from curation.core.atomic import atomic_write_bytes, npy_row_pieces, save_array
from curation.core.hashing import Encoded, fingerprint
from curation.core.layout import exact_index_path, exact_keys_path, exact_part_path, processed_path
from curation.core.node import CODE_EPOCH, Node
from curation.core.urls import normalize_url
from curation.corpus.base import CorpusPhase, PlanContext, processed_columns
from curation.corpus.cc_files import round_reads
from curation.corpus.exact_cc import (
    CC_ROUNDS,
    duplicate_rows,
    resolve_components,
    run_assemble,
    run_resolve,
    run_round,
    run_scatter,
    run_settle,
)
from curation.corpus.partition import (
    INDEX_STRIDE,
    auto_partitions,
    document,
    range_index,
    range_slice,
    range_window,
    shard_keys,
    shared_keys,
    sort_keys,
)
from curation.corpus.stream import column_batches

CC_STAGES = ("exact_scatter", "exact_round", "exact_settle", "exact_resolve")


def _url(meta: str, field: str) -> str | None:
    u = json.loads(meta).get(field)
    return normalize_url(u) if isinstance(u, str) else None


def batch_keys(cols: dict, url_field: str | None, first_row: int) -> np.ndarray:
    """Unsorted key entries of one batch of a processed shard (`content_hash`, and `meta` with a URL field)."""
    urls = [_url(m, url_field) for m in cols["meta"]] if url_field else [None] * len(cols["content_hash"])
    return shard_keys(cols["content_hash"], urls, first_row)


def run_keys(out: Path, node: Node) -> dict:
    url_field = node.spec["url"]
    parts, rows = [], 0
    columns = ("content_hash", "meta") if url_field else ("content_hash",)
    for cols in column_batches(processed_path(out, node.source, node.shard), columns):
        parts.append(batch_keys(cols, url_field, rows))
        rows += len(cols["content_hash"])
    keys = sort_keys(np.concatenate(parts) if parts else np.zeros((0, 4), np.uint64))
    path = exact_keys_path(out, node.source, node.shard)
    save_array(path, keys)
    index = exact_index_path(out, node.source, node.shard)   # a part task reads its range and no more
    atomic_write_bytes(index, range_index(keys).astype("<u8").tobytes())
    # a part task of an output URL fetches the index whole before the keys in part (`runtime.publish.fetch`)
    return {"records": rows, "keys": int(keys.shape[0]),
            "outputs": [str(index.relative_to(out)), str(path.relative_to(out))]}


def _index(out: Path, source: str, shard: str) -> np.ndarray | None:
    """The shard's range index (`run_keys`), or None (keys written by an earlier version)."""
    path = exact_index_path(out, source, shard)
    return np.fromfile(path, dtype="<u8") if path.is_file() else None


def _fetch_range(remote, rel: str, local: Path, part: int, parts: int) -> None:
    """How an `exact_part` task of an output URL fetches a shard's keys: the `.npy` header and the rows from
    the stride where its hash range starts to the stride where it ends (`range_window`, by the shard's range
    index, fetched before the keys), at their offsets in a sparse file of the array's size: `np.load(mmap_mode=
    "r")` and `range_slice` then read those rows as from the whole file. Keys without an index: whole."""
    index_path = Path(str(local)[:-len(".npy")] + ".index")
    if not index_path.is_file():
        remote.get(rel, local)
        return
    index = np.fromfile(index_path, dtype="<u8")
    remote.get_pieces(rel, local, partial(npy_row_pieces, window=lambda rows: range_window(index, rows, part, parts)))


def part_shared(slices: list[tuple[int, int, np.ndarray]]) -> np.ndarray:
    """The repeated keys of one hash range from (shard number, group, that shard's slice) in any order."""
    if not slices:
        return shared_keys(np.zeros((0, 4), np.uint64), np.zeros(0, np.int64), np.zeros(0, np.int64))
    entries = np.concatenate([s for _, _, s in slices])
    docs = np.concatenate([document(n, s[:, 3].astype(np.int64)) for n, _, s in slices])
    groups = np.concatenate([np.full(s.shape[0], g, np.int64) for _, g, s in slices])
    return shared_keys(entries, docs, groups)


def _groups(shards: list[tuple[str, str]], scope: str) -> list[int]:
    names = list(dict.fromkeys(source for source, _ in shards))
    return [names.index(source) if scope == "source" else 0 for source, _ in shards]


def run_part(out: Path, node: Node) -> dict:
    spec = node.spec
    shards = [tuple(s) for s in spec["shards"]]
    slices = []
    for number, ((source, shard), group) in enumerate(zip(shards, _groups(shards, spec["scope"]))):
        keys = np.load(exact_keys_path(out, source, shard), mmap_mode="r")
        index = _index(out, source, shard)
        slices.append((number, group, range_slice(keys, spec["part"], spec["partitions"], index)))
    shared = part_shared(slices)
    path = exact_part_path(out, spec["modality"], spec["part"])
    save_array(path, shared)
    return {"keys": sum(s.shape[0] for _, _, s in slices), "shared": int(shared.shape[0]),
            "outputs": [str(path.relative_to(out))]}


def merge_parts(parts: list[np.ndarray]) -> np.ndarray:
    """The parts' repeated keys with key numbers made unique across parts: what one task resolved before
    the components were (`resolve` over it is the reference the partitioned resolution is proved against)."""
    offset, out = 0, []
    for p in parts:
        if p.shape[0]:
            out.append(p + np.array([0, 0, offset], np.int64))
            offset += int(p[:, 2].max()) + 1
    return np.concatenate(out) if out else np.zeros((0, 3), np.int64)


def resolve_duplicates(shards: list[tuple[str, str, list[bytes], list[str], list[str | None]]], scope: str,
                       partitions: int = 1) -> list[dict]:
    """The stages in memory (keys, hash ranges, components in `partitions` partitions): (source, shard,
    hashes, ids, normalised urls) per shard in canonical order -> one row per duplicate, in canonical
    order. The result is the same for any `partitions`."""
    keys = [sort_keys(shard_keys(h, u)) for _, _, h, _, u in shards]
    names = [(s, sh) for s, sh, *_ in shards]
    groups = _groups(names, scope)
    parts = [part_shared([(n, groups[n], range_slice(k, p, partitions)) for n, k in enumerate(keys)])
             for p in range(partitions)]
    dups = resolve_components(parts, partitions)
    rows = duplicate_rows(dups, names, lambda n, rows: [shards[n][3][r] for r in rows])
    return [{k: v for k, v in r.items() if k != "node"} for r in rows]


def plan_components(modality: str, parts: int, ranges: list[Node], process: list[Node],
                    shards: list[tuple[str, str]]) -> list[list[Node]]:
    """The component stages of one modality (`curation.corpus.exact_cc`): per partition a scatter, CC_ROUNDS
    rounds and a resolve task, and one settle task between them."""
    fp = lambda what: fingerprint({"v": CODE_EPOCH, **what})  # noqa: E731
    spec = {"modality": modality, "partitions": parts}
    ranges_fp = Encoded([n.fingerprint for n in ranges])   # encoded once for every partition's fingerprint
    range_keys = [n.key for n in ranges]   # deps lists shared by the sibling tasks that read the same files
    scatter = [Node("exact_scatter", None, f"{modality}-{q:04d}", fp(
        {"phase": "exact_scatter", "part": q, "parts": parts, "ranges": ranges_fp}),
        deps=range_keys, spec={**spec, "part": q, "ranges": len(ranges)}) for q in range(parts)]
    rounds, prev = [], scatter
    for r in range(1, CC_ROUNDS + 1):   # a round reads every partition's previous round and its own edges
        prev_fp = Encoded([n.fingerprint for n in prev])
        prev = [Node("exact_round", None, f"{modality}-{r:03d}-{q:04d}", fp(
            {"phase": "exact_round", "round": r, "part": q, "prev": prev_fp,
             "edges": scatter[q].fingerprint}), deps=sorted({n.key for n in prev} | {scatter[q].key}),
            spec={**spec, "round": r, "part": q}) for q in range(parts)]
        rounds.append(prev)
    settle = Node("exact_settle", None, modality, fp({"phase": "exact_settle", "rounds": [n.fingerprint for n in prev]}),
                  deps=[n.key for n in prev + scatter], spec={**spec, "rounds": CC_ROUNDS})
    resolve_deps = [n.key for n in [settle, *prev, *scatter, *process]]   # labels, edges, ids
    resolve = [Node("exact_resolve", None, f"{modality}-{q:04d}", fp(
        {"phase": "exact_resolve", "part": q, "settle": settle.fingerprint}),
        deps=resolve_deps, spec={**spec, "part": q, "shards": shards}) for q in range(parts)]
    return [scatter, *rounds, [settle], resolve]


class ExactPhase(CorpusPhase):
    name = "exact"
    step = "exact_dedup"

    def applies(self, recipe) -> bool:
        return recipe.dedup.exact is not None

    def covers(self, src) -> bool:
        return True

    def plan(self, ctx: PlanContext) -> list[list[Node]]:
        exact = ctx.loaded.recipe.dedup.exact
        cfg = exact.model_dump(mode="json")   # `partitions` is excluded: it does not change the result
        keys, parts, finals = [], [], []
        cc: list[list[Node]] = [[] for _ in range(CC_ROUNDS + 3)]   # scatter, rounds, settle, resolve
        for modality in dict.fromkeys(s.modality for s in ctx.loaded.recipe.sources):
            process = [n for n in ctx.process if ctx.source(n.source).modality == modality]
            shards = [(n.source, n.shard) for n in process]
            mine = [Node("exact_keys", p.source, p.shard, fingerprint(
                {"v": CODE_EPOCH, "phase": "exact_keys", "url": exact.url, "process": p.fingerprint,
                 "index": INDEX_STRIDE}), deps=[p.key], spec={"url": exact.url}) for p in process]
            n_parts = exact.partitions or auto_partitions(len(process))
            listed = Encoded([[n.source, n.shard, n.fingerprint] for n in mine])   # in every part's fingerprint
            key_deps = [n.key for n in mine]   # one list, shared by every part task (each reads every shard)
            mine_parts = [Node("exact_part", None, f"{modality}-{p:04d}", fingerprint(
                {"v": CODE_EPOCH, "phase": "exact_part", "part": p, "parts": n_parts, "scope": exact.scope,
                 "keys": listed}), deps=key_deps,
                spec={"modality": modality, "part": p, "partitions": n_parts, "scope": exact.scope,
                      "shards": shards}) for p in range(n_parts)]
            graph = plan_components(modality, n_parts, mine_parts, process, shards)
            # the result is a function of the settings and the processed shards alone (whatever the
            # partitions), so the fingerprint covers exactly those
            finals.append(Node("exact", None, modality, fingerprint(
                {"v": CODE_EPOCH, "phase": "exact", "cfg": cfg,
                 "process": [[n.source, n.shard, n.fingerprint] for n in process]}),
                deps=[n.key for n in graph[-1]],   # the resolved parts (ids included)
                spec={"modality": modality, "partitions": n_parts, "shards": shards}))
            keys += mine
            parts += mine_parts
            for stage, nodes in zip(cc, graph):
                stage += nodes
        return [keys, parts, *cc, finals]

    def node_count(self, recipe, files: dict[str, int]) -> int:
        exact, n = recipe.dedup.exact, 0
        for modality in dict.fromkeys(s.modality for s in recipe.sources):
            shards = sum(files.get(s.name, 0) for s in recipe.sources if s.modality == modality)
            parts = exact.partitions or auto_partitions(shards)
            # keys per shard; per partition a hash range, a scatter, CC_ROUNDS rounds and a resolve task;
            # the settle task and the assembly
            n += shards + parts * (CC_ROUNDS + 3) + 2
        return n

    def explain(self, nodes: list[Node]) -> str:
        final = [n for n in nodes if n.phase == "exact"]
        count = {stage: sum(n.phase == stage for n in nodes) for stage in ("exact_keys", "exact_part", *CC_STAGES)}
        url = next((n.spec["url"] for n in nodes if n.phase == "exact_keys"), None)
        scope = next((n.spec["scope"] for n in nodes if n.phase == "exact_part"), "global")
        what = f"exact and URL (meta[{url!r}]) dedup" if url else "exact dedup"
        return (f"{what}, {scope}: {count['exact_keys']} key tasks → {count['exact_part']} hash-range tasks → "
                f"{sum(count[s] for s in CC_STAGES)} component tasks ({count['exact_resolve']} resolve) → " +
                ", ".join(f"exact({n.shard}) {n.fingerprint}" for n in final))

    def drop_node(self, stages: list[list[Node]], src) -> Node:
        return next(n for n in stages[-1] if n.shard == src.modality)

    def partial_reads(self):
        # a part task reads its hash range of each shard's keys; a resolve task the ids of the processed
        # shards, not their text
        def part(node: Node, rel: str):
            if not rel.endswith(".npy") or "/keys/" not in rel:
                return None
            return lambda remote, rel, local: _fetch_range(remote, rel, local, node.spec["part"],
                                                           node.spec["partitions"])
        return {"exact_part": part, "exact_round": round_reads,
                "exact_resolve": lambda node, rel: processed_columns(rel, ["id"])}

    def runners(self):
        return {"exact_keys": run_keys, "exact_part": run_part, "exact_scatter": run_scatter,
                "exact_round": run_round, "exact_settle": run_settle, "exact_resolve": run_resolve,
                "exact": lambda out, node: run_assemble(out, node, self)}
