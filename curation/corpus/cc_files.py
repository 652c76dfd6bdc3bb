"""Connected components in hash partitions as tasks joined by files: the rounds of
`curation.core.partitioned_graph`, shared by the phases that cluster that way (MinHash clustering,
`curation.corpus.minhash_cc`; exact and URL dedup, `curation.corpus.exact_cc`). Under a phase's folder `base`:

    edges/q.npy         partition q's edges (`scatter_part`), written by its scatter task
    rRRR/q.npy          round R of partition q: (2, n) its owned nodes and their labels (R = 0: their own)
    rRRR/q.out.npy      its label proposals, sorted by owner; q.off.npy each owner's offsets in them
    rRRR/q.json         whether the round changed anything, counts

A round task reads every partition's previous round (memory-mapped) and its own edges; a settle task runs
any further rounds, one partition at a time, until one changes nothing (`MAX_ROUNDS` in all). On an output
URL a round task fetches only what it reads (`round_reads`): every partition's previous state, the rows of
their proposals addressed to it, and its own edges.

A resolve task writes its partition's duplicates sorted by shard (`write_resolved`), in row groups of
`RESOLVED_GROUP_ROWS`, and the assembly task reads every partition's file as a stream, a shard at a time
(`ShardRuns`). A row group per shard made each file's footer grow with the shards (partitions × shards footers
of about 3 KB, all held at once by the assembly: 8 MB at a million documents, hundreds of GB at a billion);
now it grows with the rows, and the assembly holds a row group and a batch per partition.
"""
from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from functools import partial
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from curation.core.atomic import atomic_write_json, npy_row_pieces, save_array
from curation.core.node import Node
from curation.core.partitioned_graph import (
    MAX_ROUNDS,
    NotConverged,
    lookup_labels,
    outbox_offsets,
    owned_nodes,
    round_part,
    scatter_part,
)


def state_path(base: Path, r: int, q: int, kind: str = "") -> Path:
    """Round r of partition q: `` (2, n) nodes and labels, `.out` proposals, `.off` their offsets, `.json`."""
    return base / f"r{r:03d}" / (f"{q:03d}{kind}" if kind == ".json" else f"{q:03d}{kind}.npy")


# Rows per row group of a resolve part, and per batch the assembly reads from each part: the assembly holds a
# row group's compressed columns and one batch per partition (1,024 partitions: about 150 MB)
RESOLVED_GROUP_ROWS, RESOLVED_BATCH_ROWS = 4_096, 1_024


def write_resolved(path: Path, table: pa.Table) -> None:
    """A resolve task's duplicates (sorted by shard, then by document) as Parquet in row groups of
    `RESOLVED_GROUP_ROWS`, written whole or not at all."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    pq.write_table(table, tmp, row_group_size=RESOLVED_GROUP_ROWS, compression="zstd")
    tmp.replace(path)


class ShardRuns:
    """The rows of a resolve part (`write_resolved`, or a file of one row group per shard from earlier
    versions: both are sorted by shard), handed out one shard at a time: `take(number)` for ascending shard
    numbers, with one batch of the file in memory. `shard_of(table)` gives the shard number of each row."""

    def __init__(self, path: Path, shard_of: Callable[[pa.Table], np.ndarray]):
        self.path = path
        self._batches = pq.ParquetFile(path).iter_batches(batch_size=RESOLVED_BATCH_ROWS)
        self._shard_of = shard_of
        self._table: pa.Table | None = None
        self._numbers = np.zeros(0, np.int64)
        self._taken = -1

    def take(self, number: int) -> list[pa.Table]:
        """The rows of shard `number` (in the file's order), as pieces; `number` must grow from call to call."""
        if number <= self._taken:
            raise ValueError(f"shard {number} asked for after shard {self._taken}: ask in ascending order")
        self._taken, pieces = number, []
        while True:
            if self._table is None:
                batch = next(self._batches, None)
                if batch is None:
                    return pieces
                self._table = pa.Table.from_batches([batch])
                self._numbers = np.asarray(self._shard_of(self._table), np.int64)
                if self._numbers.size and np.any(np.diff(self._numbers) < 0):
                    raise ValueError(f"{self.path} is not sorted by shard; re-run `curate run --force`")
            lo, hi = np.searchsorted(self._numbers, [number, number + 1])
            if lo:   # rows of a shard before `number` that were never asked for
                raise ValueError(f"{self.path} holds rows of shard {int(self._numbers[0])} after shard {number} "
                                 f"was asked for: it is not sorted by shard; re-run `curate run --force`")
            if hi > lo:
                pieces.append(self._table.slice(lo, hi - lo))
            if hi < self._table.num_rows:
                self._table, self._numbers = self._table.slice(hi), self._numbers[hi:]
                return pieces
            self._table = None


def edges_file(base: Path, q: int) -> Path:
    return base / "edges" / f"{q:03d}.npy"


def write_round(out: Path, base: Path, r: int, q: int, nodes: np.ndarray, labels: np.ndarray, outbox: np.ndarray,
                parts: int, changed: bool, **extra) -> list[str]:
    paths = [state_path(base, r, q, k) for k in ("", ".out", ".off", ".json")]
    save_array(paths[0], np.stack([nodes, labels]).astype(np.int64))
    save_array(paths[1], outbox.astype(np.int64))
    save_array(paths[2], outbox_offsets(outbox, parts).astype(np.int64))
    atomic_write_json(paths[3], {"changed": changed, "nodes": int(nodes.size), "proposals": int(outbox.shape[0]),
                                 **extra})
    return [str(p.relative_to(out)) for p in paths]


def scatter(out: Path, base: Path, chunks: Iterable[np.ndarray], q: int, parts: int, **extra) -> dict:
    """Partition q's edges from the chunks of the edge list (read one at a time), and round 0: its nodes, each
    its own label. `extra` goes into round 0's json. Returns the task's marker payload."""
    edges = scatter_part(chunks, q, parts)
    path = edges_file(base, q)
    save_array(path, edges)
    nodes = owned_nodes(edges, q, parts)
    outputs = write_round(out, base, 0, q, nodes, nodes, np.zeros((0, 2), np.int64), parts, True, **extra)
    return {"edges": int(edges.shape[0]), "nodes": int(nodes.size), "outputs": [str(path.relative_to(out)), *outputs]}


def run_round(out: Path, base: Path, r: int, q: int, parts: int) -> tuple[list[str], bool]:
    """Round r of partition q from the files of round r - 1 (every partition's, memory-mapped)."""
    prev = [np.load(state_path(base, r - 1, p), mmap_mode="r") for p in range(parts)]
    states = [(s[0], s[1]) for s in prev]
    inbox = []
    for p in range(parts):
        off = np.load(state_path(base, r - 1, p, ".off"))
        if off[q + 1] > off[q]:
            inbox.append(np.asarray(np.load(state_path(base, r - 1, p, ".out"), mmap_mode="r")[off[q]:off[q + 1]]))
    inbox = np.concatenate(inbox) if inbox else np.zeros((0, 2), np.int64)
    edges = np.load(edges_file(base, q))
    nodes, labels = np.asarray(prev[q][0]), np.asarray(prev[q][1])
    new, outbox, changed = round_part(q, parts, edges, nodes, labels, inbox,
                                      lambda x: lookup_labels(states, x, parts))
    return write_round(out, base, r, q, nodes, new, outbox, parts, changed), changed


def round_reads(node: Node, rel: str) -> Callable | None:
    """`CorpusPhase.partial_reads` of a round task of partition q (what it fetches of its deps' files on an
    output URL): nothing of another partition's edges or of any `.json` (only the settle task reads those),
    of each previous round's proposals the rows addressed to q (by that partition's `.off`, a whole file,
    fetched first), and the rest whole: every partition's state, which `lookup_labels` searches. Each round
    task used to download every partition's edges and proposals: parts times the graph, per round."""
    q = node.spec["part"]
    folder, name = rel.rsplit("/", 2)[-2:]
    if name.endswith(".json") or (folder == "edges" and int(name.split(".")[0]) != q):
        return _nothing
    if name.endswith(".out.npy"):
        return partial(_addressed_to, q)
    return None


def _nothing(remote, rel: str, local: Path) -> None:
    return None


def _addressed_to(q: int, remote, rel: str, local: Path) -> None:
    off = np.load(Path(str(local)[:-len(".out.npy")] + ".off.npy"))
    remote.get_pieces(rel, local, partial(npy_row_pieces, window=lambda rows: (int(off[q]), int(off[q + 1]))))


def changed(base: Path, r: int, parts: int) -> bool:
    return any(json.loads(state_path(base, r, q, ".json").read_text())["changed"] for q in range(parts))


def settle(out: Path, base: Path, r: int, parts: int, graph: str, setting: str,
           max_rounds: int = MAX_ROUNDS) -> tuple[int, list[str]]:
    """Rounds after the planned r while the last one changed anything, one partition at a time: (the final
    round, the files written). After `max_rounds` rounds in all, an error naming the `graph` and the partitions
    `setting`."""
    outputs: list[str] = []
    while changed(base, r, parts):
        r += 1
        if r > max_rounds:
            raise NotConverged(f"{graph}'s components did not settle in {max_rounds} rounds over {parts} partitions; "
                               f"its label chains are longer than any seen so far (report the recipe), or lower "
                               f"{setting}")
        for q in range(parts):
            outputs += run_round(out, base, r, q, parts)[0]
    return r, outputs
