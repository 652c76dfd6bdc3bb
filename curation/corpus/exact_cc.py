"""Exact and URL dedup's survivor rule by connected components, in hash partitions: the stages after
`exact_part` (`curation.corpus.exact`), joined by files under `<out>/work/exact/cc/<modality>/`, so that no
task holds more than about 1/parts of the repeated-key rows.

The rule (`curation.corpus.partition.resolve`: in canonical order, a record is kept when none of its keys
belongs to an earlier kept record) only ever relates records that share a key, so it is independent across
the connected components of the bipartite graph of documents and their repeated keys: resolving each
component alone, by the same sequential rule, and taking the union gives exactly the rule's result over
all rows. Every repeated-key row (document, kind, key) is one edge (key node, document); a key node is
negative (`key_node`), a document (`shard number << 32 | row`) never is, so the two never collide and a
component's smallest node, its label, is a key.

    exact_scatter(q)    partition q's edges, read from every hash range's
                        repeated keys (one file at a time)                    → cc/<modality>/edges/q.npy, r000/q*
    exact_round(r, q)   one round of partition q (`cc_files.run_round`)       → cc/<modality>/rRRR/q*
    exact_settle        further rounds while the last one changed anything    → cc/<modality>/final.json
    exact_resolve(q)    the components whose label partition q owns: their
                        rows, gathered from every partition's edges (memory-
                        mapped, one at a time), today's `resolve`, the ids    → cc/<modality>/resolve/q.parquet, q.json
    exact(modality)     the parts' rows, shard by shard in canonical order:
                        the same drop lists as one task resolving every row   → drops/
"""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from curation.core.atomic import atomic_write_json
from curation.core.fds import ensure_open_files
from curation.core.layout import exact_part_path, processed_path, work_dir
from curation.core.node import Node
from curation.core.partitioned_graph import MAX_ROUNDS, owner, partitioned_roots, scatter_part
from curation.corpus import cc_files
from curation.corpus.partition import REASONS, ROW_BITS, resolve

CC_ROUNDS = 2        # rounds planned as tasks; the settle task runs any further ones (chains of re-crawls
                     # and copies need more: reports/benchmarks/cc.md)
KEY_BITS = 40        # key numbers within one hash range (partitions <= 4096: 12 bits; kind: 1 bit)
DUPS = pa.schema([("node", pa.int64()), ("source", pa.string()), ("shard", pa.string()), ("id", pa.string()),
                  ("reason", pa.string()), ("duplicate_of_source", pa.string()), ("duplicate_of_id", pa.string()),
                  ("detail", pa.string())])


def key_node(part: int, kind: np.ndarray, key: np.ndarray) -> np.ndarray:
    """The graph node of repeated key number `key` of hash range `part` (of that `kind`): negative, so it never
    equals a document, and distinct for distinct (part, key) since key numbers are unique within a range."""
    key = np.asarray(key, dtype=np.int64)
    if key.size and int(key.max()) >= 1 << KEY_BITS:
        raise ValueError(f"exact dedup: hash range {part} holds more than 2^{KEY_BITS} repeated keys")
    return -1 - ((((np.int64(part) << KEY_BITS) | key) << 1) | np.asarray(kind, dtype=np.int64))


def key_edges(part: int, shared: np.ndarray) -> np.ndarray:
    """(m, 2) edges (key node, document) of hash range `part`'s repeated-key rows (document, kind, key)."""
    shared = np.asarray(shared, dtype=np.int64).reshape(-1, 3)
    return np.stack([key_node(part, shared[:, 1], shared[:, 2]), shared[:, 0]], axis=1)


def edge_rows(edges: np.ndarray) -> np.ndarray:
    """The (document, kind, key) rows `resolve` reads, from key–document edges (registrations, the self-loops
    of key nodes, are skipped); key numbers are renumbered from 0, unique over the given edges."""
    e = np.asarray(edges, dtype=np.int64).reshape(-1, 2)
    e = e[e[:, 0] != e[:, 1]]
    x = -1 - e[:, 0]
    _, key = np.unique(x, return_inverse=True)
    return np.stack([e[:, 1], x & 1, key.reshape(-1)], axis=1).astype(np.int64)


def routed(edges: np.ndarray, nodes: np.ndarray, labels: np.ndarray, q: int, parts: int) -> np.ndarray:
    """The key–document edges of one partition (each document end owned by it, with its final label among
    `nodes`, `labels`) whose component resolve task q takes: those whose label q owns."""
    e = np.asarray(edges, dtype=np.int64).reshape(-1, 2)
    e = e[e[:, 0] != e[:, 1]]
    if not e.shape[0]:
        return e
    label = np.asarray(labels)[np.searchsorted(nodes, e[:, 1])]
    return e[owner(label, parts) == q]


def duplicate_rows(dups: np.ndarray, shards: list[tuple[str, str]], ids) -> list[dict]:
    """Rows (node, source, shard, id, reason, duplicate_of_source, duplicate_of_id, detail) of resolved
    duplicates; `ids(shard number, rows)` gives the ids at those rows of that shard."""
    mask = (1 << ROW_BITS) - 1
    wanted: dict[int, set[int]] = {}
    for g in np.concatenate([dups[:, 0], dups[:, 2]]).tolist():
        wanted.setdefault(g >> ROW_BITS, set()).add(g & mask)
    names = {}
    for number, rows in sorted(wanted.items()):
        rows = sorted(rows)
        names.update({(number << ROW_BITS) | r: rid for r, rid in zip(rows, ids(number, rows))})
    out = []
    for g, kind, keep in dups.tolist():
        (source, shard), (keep_source, _) = shards[g >> ROW_BITS], shards[keep >> ROW_BITS]
        out.append({"node": g, "source": source, "shard": shard, "id": names[g], "reason": REASONS[kind],
                    "duplicate_of_source": keep_source, "duplicate_of_id": names[keep],
                    "detail": f"{keep_source}/{names[keep]}"})
    return out


def resolve_components(ranges: list[np.ndarray], parts: int) -> np.ndarray:
    """In memory, what the tasks compute from the hash ranges' repeated-key rows (range p: (document, kind,
    key number in p)): the components in `parts` partitions (`partitioned_roots`), each partition's edges
    routed by label to `parts` resolve tasks, `resolve` in each, the parts by document. Equals `resolve`
    over all rows with key numbers made unique (`curation.corpus.exact.merge_parts`)."""
    chunks = [key_edges(p, s) for p, s in enumerate(ranges)]
    edges = np.concatenate(chunks) if chunks else np.zeros((0, 2), np.int64)
    nodes, labels, _ = partitioned_roots(edges, parts)
    scattered = [scatter_part([edges], p, parts) for p in range(parts)]
    found = [resolve(edge_rows(np.concatenate([routed(e, nodes, labels, q, parts) for e in scattered])))
             for q in range(parts)]
    dups = np.concatenate(found)
    return dups[np.argsort(dups[:, 0], kind="stable")]


# -- tasks --------------------------------------------------------------------------------------------------
def cc_base(out: Path, modality: str) -> Path:
    return work_dir(out, "exact") / "cc" / modality


def run_scatter(out: Path, node: Node) -> dict:
    spec = node.spec
    n_ranges = spec["ranges"]
    files = [exact_part_path(out, spec["modality"], p) for p in range(n_ranges)]
    rows = sum(np.load(f, mmap_mode="r").shape[0] for f in files)   # the repeated-key rows the ranges found
    chunks = (key_edges(p, np.load(f, mmap_mode="r")) for p, f in enumerate(files))
    return cc_files.scatter(out, cc_base(out, spec["modality"]), chunks, spec["part"], spec["partitions"],
                            rows=rows)


def run_round(out: Path, node: Node) -> dict:
    spec = node.spec
    outputs, changed = cc_files.run_round(out, cc_base(out, spec["modality"]), spec["round"], spec["part"],
                                          spec["partitions"])
    return {"changed": changed, "outputs": outputs}


def run_settle(out: Path, node: Node) -> dict:
    spec = node.spec
    base = cc_base(out, spec["modality"])
    r, outputs = cc_files.settle(out, base, spec["rounds"], spec["partitions"],
                                 f"dedup.exact ({spec['modality']}): the document-key graph",
                                 "dedup.exact.partitions", MAX_ROUNDS)
    path = base / "final.json"
    atomic_write_json(path, {"round": r})
    return {"rounds": r, "outputs": [*outputs, str(path.relative_to(out))]}


def _resolve_paths(out: Path, modality: str, q: int) -> tuple[Path, Path]:
    base = cc_base(out, modality) / "resolve"
    return base / f"{q:03d}.parquet", base / f"{q:03d}.json"


def run_resolve(out: Path, node: Node) -> dict:
    spec = node.spec
    q, parts, modality = spec["part"], spec["partitions"], spec["modality"]
    shards = [tuple(s) for s in spec["shards"]]
    base = cc_base(out, modality)
    final = json.loads((base / "final.json").read_text())["round"]
    mine = []
    for p in range(parts):   # this task's components, from every partition (memory-mapped, one at a time)
        state = np.load(cc_files.state_path(base, final, p), mmap_mode="r")
        mine.append(routed(np.load(cc_files.edges_file(base, p), mmap_mode="r"), state[0], state[1], q, parts))
    rows = edge_rows(np.concatenate(mine))
    dups = resolve(rows)

    def ids(number: int, at: list[int]) -> list[str]:
        source, shard = shards[number]
        return pq.read_table(processed_path(out, source, shard), columns=["id"]).column("id").take(at).to_pylist()

    found = duplicate_rows(dups, shards, ids)   # in canonical order: by shard, then by document
    path, index = _resolve_paths(out, modality, q)
    cc_files.write_resolved(path, pa.Table.from_pylist(found, schema=DUPS))
    atomic_write_json(index, {"rows": int(rows.shape[0]), "duplicates": len(found)})
    return {"rows": int(rows.shape[0]), "duplicates": len(found),
            "outputs": [str(p.relative_to(out)) for p in (path, index)]}


def _shard_numbers(table: pa.Table) -> np.ndarray:
    return table.column("node").to_numpy() >> ROW_BITS


def run_assemble(out: Path, node: Node, phase) -> dict:
    """The resolve parts' rows, one shard at a time in canonical order (by document within it), into one drop
    list per shard: the files and rows one task resolving every repeated key wrote."""
    spec = node.spec
    shards = [tuple(s) for s in spec["shards"]]
    parts, modality = spec["partitions"], spec["modality"]
    ensure_open_files(parts, f"the exact dedup assembly ({parts} partitions)")
    runs = [cc_files.ShardRuns(_resolve_paths(out, modality, q)[0], _shard_numbers) for q in range(parts)]
    outputs, n = [], 0
    for number, shard in enumerate(shards):
        pieces = [piece for r in runs for piece in r.take(number)]
        table = pa.concat_tables(pieces) if pieces else DUPS.empty_table()
        table = table.take(pa.array(np.argsort(table.column("node").to_numpy(), kind="stable")))
        outputs.append(phase.write_drop_table(out, shard, table.column("id"), table.column("reason"),
                                              table.column("detail")))
        n += table.num_rows
    return {"duplicates": n, "outputs": outputs}

