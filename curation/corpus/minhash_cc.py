"""MinHash clustering in hash partitions: the stages after `band` (`curation.corpus.minhash`), joined by files
under `<out>/work/minhash/cc/`, so that no task holds more than about 1/parts of the band edges (the
algorithm and why it is exact: `curation.core.partitioned_graph`; its rounds as tasks joined by files:
`curation.corpus.cc_files`):

    cc_scatter(q)    partition q's edges, read from every band file (memory-
                     mapped, one at a time); its nodes with their own labels      → cc/edges/q.npy, cc/r000/q*
    cc_round(r, q)   one round of partition q (`round_part`) from round r - 1
                     of every partition: its labels, the label proposals sent
                     to it, the others' labels it looks up                        → cc/rRRR/q.npy, .out.npy, .off.npy, .json
    cc_settle        further rounds while the last one changed anything, one
                     partition at a time (so it too holds 1/parts of the edges);
                     MAX_ROUNDS in all, else a clear error                        → cc/final.json and its rounds
    cc_resolve(q)    the components whose smallest node lies in global-index
                     range q (whole components, gathered from every partition's
                     final labels: nodes only, no edges), today's survivor rule,
                     their ids and scores                                         → cc/resolve/q.dups.parquet, q.clusters.parquet
    clusters         the parts in order: duplicates.parquet (shard by shard, in
                     canonical order), clusters.parquet (by component minimum),
                     params.json and the drop lists; the same rows as when one
                     task clustered every edge                                    → duplicates.parquet, clusters.parquet, ...

Survivor rules (`dedup.minhash.keep`, unchanged): `earliest` keeps the component's minimum (earliest source,
shard, row); `highest_quality` keeps the highest `score_field`, ties by that minimum; a component holding an
earlier run's document (`index:`) keeps that one. A resolve task holds whole components, so the rule is
applied exactly as before, and the parts concatenate into the same rows in the same order.
"""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from curation.core.atomic import atomic_write_json, atomic_write_parquet
from curation.core.fds import ensure_open_files
from curation.core.graph import CLUSTER_COLUMNS, cluster_row
from curation.core.layout import edges_path, processed_path, work_dir
from curation.core.node import Node
from curation.core.partitioned_graph import MAX_ROUNDS
from curation.corpus import cc_files
from curation.corpus.cc_files import scatter, settle, state_path
from curation.corpus.minhash_sig import documents, sig_file
from curation.errors import RecipeError

CC_ROUNDS = 2       # rounds planned as tasks; the settle task runs any further ones. Band edges are stars
                    # around each bucket's first document: round 1 labels them, round 2 finds nothing to
                    # change (reports/benchmarks/cc.md, 100k and 300k documents, 1 and 8 partitions)
CLUSTER_SCHEMA = pa.schema(CLUSTER_COLUMNS)
DUPLICATES = pa.schema([("source", pa.string()), ("shard", pa.string()), ("id", pa.string()), ("cluster", pa.string())])
DUP_PART = pa.schema([("node", pa.int64()), *DUPLICATES])


def corpus_shards(out: Path, shards: list[tuple[str, str]], index: list[list[str]]) -> list[tuple[Path, str, str]]:
    """(run folder, source, shard) in global order: the index runs' shards first, then this run's."""
    return [(Path(root), source, shard) for root, source, shard in index] + \
        [(out, source, shard) for source, shard in shards]


def cc_dir(out: Path) -> Path:
    return work_dir(out, "minhash") / "cc"


def _state(out: Path, r: int, q: int, kind: str = "") -> Path:
    return state_path(cc_dir(out), r, q, kind)


def run_scatter(out: Path, node: Node) -> dict:
    spec = node.spec
    q, parts = spec["part"], spec["partitions"]
    files = [edges_path(out, b, p) for b in range(spec["bands"]) for p in range(parts)]
    band_edges = sum(np.load(f, mmap_mode="r").shape[0] for f in files)   # the edges the band tasks found
    return scatter(out, cc_dir(out), (np.load(f, mmap_mode="r") for f in files), q, parts, band_edges=band_edges)


def run_round(out: Path, node: Node) -> dict:
    outputs, changed = cc_files.run_round(out, cc_dir(out), node.spec["round"], node.spec["part"],
                                          node.spec["partitions"])
    return {"changed": changed, "outputs": outputs}


def run_settle(out: Path, node: Node) -> dict:
    parts = node.spec["partitions"]
    r, outputs = settle(out, cc_dir(out), node.spec["rounds"], parts, "dedup.minhash: the near-duplicate graph",
                        "dedup.minhash.partitions", MAX_ROUNDS)
    path = cc_dir(out) / "final.json"
    band_edges = json.loads(_state(out, 0, 0, ".json").read_text())["band_edges"]
    atomic_write_json(path, {"round": r, "band_edges": band_edges})
    return {"rounds": r, "outputs": [*outputs, str(path.relative_to(out))]}


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
    if not nodes.size:   # no near duplicates (in this part)
        return roots.copy()
    order = np.lexsort((nodes, -scores, roots))            # by component, best first
    first = np.r_[True, roots[order][1:] != roots[order][:-1]]
    best = dict(zip(roots[order][first].tolist(), nodes[order][first].tolist()))
    return np.array([r if r < indexed else best[r] for r in roots.tolist()], dtype=np.int64)


def _offsets(entries) -> np.ndarray:
    sizes = [documents(sig_file(root, source, shard)) for root, source, shard in entries]
    return np.concatenate([[0], np.cumsum(sizes, dtype=np.int64)]).astype(np.int64)


def root_range(q: int, parts: int, total: int) -> tuple[int, int]:
    """Global-index range q of `parts` over `total` documents: resolve task q takes the components whose
    smallest node lies in it, so the parts, concatenated, are in component order."""
    return q * total // parts, (q + 1) * total // parts


def resolve_part(nodes: np.ndarray, roots: np.ndarray, entries, n_index: int, offsets: np.ndarray,
                 cfg: dict) -> tuple[list[dict], list[dict]]:
    """(duplicate rows with their `node`, ascending; cluster rows by component minimum) of whole components:
    (nodes ascending, component minimum of each). Today's rule, as when one task held every component."""
    indexed = int(offsets[n_index])   # earlier runs' documents come first: never removed, only matched against
    kept = roots
    if cfg["keep"] == "highest_quality":
        kept = highest_quality(roots, nodes, _scores(entries, n_index, offsets, nodes, cfg["score_field"]), indexed)
    removed = (nodes != kept) & (nodes >= indexed)
    keep = np.isin(roots, roots[removed])  # clusters with at least one document of this run removed
    nodes, roots, kept, removed = nodes[keep], roots[keep], kept[keep], removed[keep]
    names = _names(entries, n_index, offsets, nodes)

    def name(g: int) -> str:
        return f"{names[g][0]}/{names[g][2]}"

    dup_rows = [{"node": g, "source": names[g][0], "shard": names[g][1], "id": names[g][2], "cluster": name(k)}
                for g, k in zip(nodes[removed].tolist(), kept[removed].tolist())]
    members: dict[int, tuple[int, list[int]]] = {}   # component minimum -> (survivor, members ascending)
    for g, r, k in zip(nodes.tolist(), roots.tolist(), kept.tolist()):
        members.setdefault(r, (k, []))[1].append(g)
    labels = {g: (source, rid) for g, (source, _, rid) in names.items()}
    return dup_rows, [cluster_row(labels, k, m) for _, (k, m) in sorted(members.items())]


def _resolve_paths(out: Path, q: int) -> tuple[Path, Path, Path]:
    base = cc_dir(out) / "resolve"
    return base / f"{q:03d}.dups.parquet", base / f"{q:03d}.clusters.parquet", base / f"{q:03d}.json"


def run_resolve(out: Path, node: Node) -> dict:
    spec = node.spec
    q, parts = spec["part"], spec["partitions"]
    entries = corpus_shards(out, [tuple(s) for s in spec["shards"]], spec["index"])
    offsets = _offsets(entries)
    settled = json.loads((cc_dir(out) / "final.json").read_text())
    final = settled["round"]
    lo, hi = root_range(q, parts, int(offsets[-1]))
    nodes, roots = [], []
    for p in range(parts):   # this range's components, from every partition (memory-mapped, one at a time)
        state = np.load(_state(out, final, p), mmap_mode="r")
        mine = np.flatnonzero((state[1] >= lo) & (state[1] < hi))
        nodes.append(np.asarray(state[0][mine]))
        roots.append(np.asarray(state[1][mine]))
    nodes, roots = np.concatenate(nodes), np.concatenate(roots)
    order = np.argsort(nodes, kind="stable")
    dup_rows, cluster_rows = resolve_part(nodes[order], roots[order], entries, len(spec["index"]), offsets,
                                          spec["cfg"])
    dups, clusters, index = _resolve_paths(out, q)
    # the rows by document, so by shard: `clusters` reads one shard's duplicates at a time (`cc_files.ShardRuns`)
    cc_files.write_resolved(dups, pa.Table.from_pylist(dup_rows, schema=DUP_PART))
    atomic_write_parquet(clusters, pa.Table.from_pylist(cluster_rows, schema=CLUSTER_SCHEMA))
    atomic_write_json(index, {"duplicates": len(dup_rows), "clusters": len(cluster_rows),
                              "band_edges": settled["band_edges"], "indexed": int(offsets[len(spec["index"])])})
    return {"duplicates": len(dup_rows), "clusters": len(cluster_rows),
            "outputs": [str(p.relative_to(out)) for p in (dups, clusters, index)]}


def run_clusters(out: Path, node: Node, phase) -> dict:
    """The resolve parts assembled into the files one clustering task wrote before (same names, schemas, rows
    and order), one shard's duplicates and one part's clusters at a time."""
    spec = node.spec
    parts = spec["partitions"]
    shards = [tuple(s) for s in spec["shards"]]
    base = work_dir(out, "minhash")
    indexes = [json.loads(_resolve_paths(out, q)[2].read_text()) for q in range(parts)]
    numbers = pa.array([f"{source}\0{shard}" for source, shard in shards])

    def shard_numbers(table: pa.Table) -> np.ndarray:   # a row's shard, by its (source, shard) names
        found = pc.index_in(pc.binary_join_element_wise(table.column("source"), table.column("shard"), "\0"),
                            value_set=numbers)
        if found.null_count:
            raise ValueError("a MinHash resolve part names a shard this run does not have; re-run `curate run --force`")
        return found.to_numpy(zero_copy_only=False)

    ensure_open_files(parts, f"the MinHash clusters assembly ({parts} partitions)")
    runs = [cc_files.ShardRuns(_resolve_paths(out, q)[0], shard_numbers) for q in range(parts)]
    n_dups = n_clusters = 0
    drops = []
    base.mkdir(parents=True, exist_ok=True)
    tmp = base / "duplicates.parquet.tmp"
    pending: list[pa.Table] = []   # row groups of `RESOLVED_GROUP_ROWS`, not one per shard (its footer)
    with pq.ParquetWriter(tmp, DUPLICATES, compression="zstd") as w:
        for number, shard in enumerate(shards):
            pieces = [piece for r in runs for piece in r.take(number)]
            table = pa.concat_tables(pieces) if pieces else DUP_PART.empty_table()
            table = table.take(pa.array(np.argsort(table.column("node").to_numpy(), kind="stable")))
            rows = pa.Table.from_arrays([table.column(c).combine_chunks() for c in DUPLICATES.names], schema=DUPLICATES)
            pending.append(rows)
            if sum(t.num_rows for t in pending) >= cc_files.RESOLVED_GROUP_ROWS:
                w.write_table(pa.concat_tables(pending))
                pending = []
            drops.append(phase.write_drop_table(out, shard, rows.column("id"), "near_duplicate", rows.column("cluster")))
            n_dups += rows.num_rows
        w.write_table(pa.concat_tables(pending) if pending else DUPLICATES.empty_table())
    tmp.replace(base / "duplicates.parquet")
    tmp = base / "clusters.parquet.tmp"
    with pq.ParquetWriter(tmp, CLUSTER_SCHEMA, compression="zstd") as w:
        for q in range(parts):
            t = pq.read_table(_resolve_paths(out, q)[1], schema=CLUSTER_SCHEMA)
            w.write_table(t)
            n_clusters += t.num_rows
    tmp.replace(base / "clusters.parquet")
    params = {k: spec["cfg"][k] for k in ("ngram", "seed", "language")} | {"bands": spec["bands"], "rows": spec["rows"]}
    atomic_write_json(base / "params.json", params)
    return {"duplicates": n_dups, "clusters": n_clusters, "edges": indexes[0]["band_edges"],
            "indexed": indexes[0]["indexed"],
            "outputs": ["work/minhash/duplicates.parquet", "work/minhash/clusters.parquet",
                        "work/minhash/params.json", *drops]}
