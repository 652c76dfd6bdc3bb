"""Connected components over an edge list split into hash partitions, so that no task holds more than
about 1/parts of the edges (`curation.corpus.minhash_cc` runs these functions as tasks joined by files).

Every node is owned by one partition, `owner(node)` (a splitmix64 hash of the node, modulo parts). A
partition holds:

    edges      (a, b), a <= b, whose larger end it owns, plus (a, a) for every node it owns that is only
               ever a smaller end (its registration), unique and sorted           `scatter_part`
    labels     one label per node it owns: a node of the same component, never larger than the node
               (start: the node itself)

A round, per partition, from the previous round's state of every partition (read-only) and the label
proposals addressed to it (`round_part`):

    1. merge     each owned label becomes the minimum of itself and the proposals for it;
    2. jump      pointer jumping: label <- label of label (the other partitions' labels looked up in
                 their previous state), a bounded number of hops;
    3. union     union-find over its edges plus the edge (x, label of x) of every node x it touches:
                 every touched node gets m(x), the smallest node of its local component;
    4. exchange  owned labels become m(x); for a touched node owned elsewhere whose known label is
                 larger than m(x), the proposal (x, m(x)) goes to its owner.

Labels only decrease and always name a node of the same component (an edge or a label joins the two).
A round in which no partition changed a label and none sent a proposal is a fixed point, and then every
label is its component's smallest node: m(x) = label(x) for every touched x, so both ends of an edge have
one label (they share a local component), every label is its own label (the edge (x, label(x)) is
local), and a label never exceeds the nodes it labels, so the constant label of a component is its
minimum. `partitioned_roots` runs the rounds in memory (the property tests compare it with
`curation.core.graph.clustered_roots`, the single-task computation).

Rounds: information crosses partitions once per round, and pointer jumping halves the label chains, so
components of diameter d settle in about log2(d) + 2 rounds (a chain of 10,000 nodes over 8 partitions:
see tests/core/test_partitioned_graph.py); near-duplicate clusters are stars and short paths.
"""
from __future__ import annotations

from collections.abc import Callable, Iterable

import numpy as np

from curation.core.graph import components

HOPS = 8            # pointer-jumping hops per round (each is a lookup; any number is correct)
MAX_ROUNDS = 64     # a graph that has not settled by then is reported, not looped on for ever


class NotConverged(RuntimeError):
    """The rounds did not reach a fixed point within the limit."""


def owner(nodes: np.ndarray, parts: int) -> np.ndarray:
    """The partition that owns each node: splitmix64(node) mod parts (consecutive documents spread evenly)."""
    x = np.asarray(nodes, dtype=np.int64).astype(np.uint64)
    with np.errstate(over="ignore"):
        x = x + np.uint64(0x9E3779B97F4A7C15)
        x = (x ^ (x >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        x = (x ^ (x >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        x = x ^ (x >> np.uint64(31))
    return (x % np.uint64(parts)).astype(np.int64)


def unique_rows(pairs: np.ndarray) -> np.ndarray:
    """The distinct rows of an (n, 2) int64 array, sorted."""
    if pairs.shape[0] == 0:
        return np.zeros((0, 2), np.int64)
    order = np.lexsort((pairs[:, 1], pairs[:, 0]))
    p = pairs[order]
    keep = np.r_[True, (p[1:, 0] != p[:-1, 0]) | (p[1:, 1] != p[:-1, 1])]
    return np.ascontiguousarray(p[keep])


def scatter_part(chunks: Iterable[np.ndarray], part: int, parts: int) -> np.ndarray:
    """Partition `part`'s edges from every chunk of the edge list (each (k, 2), possibly memory-mapped, read
    one at a time): the edges whose larger end it owns, and a self-loop registering each node it owns that is
    a smaller end. Duplicate edges and either orientation collapse to one (a, b), a <= b."""
    out = []
    for chunk in chunks:
        e = np.asarray(chunk, dtype=np.int64).reshape(-1, 2)
        if not e.shape[0]:
            continue
        a, b = np.minimum(e[:, 0], e[:, 1]), np.maximum(e[:, 0], e[:, 1])
        mine = owner(b, parts) == part
        out.append(unique_rows(np.stack([a[mine], b[mine]], axis=1)))
        reg = np.unique(a[owner(a, parts) == part])
        out.append(np.stack([reg, reg], axis=1))
    return unique_rows(np.concatenate(out)) if out else np.zeros((0, 2), np.int64)


def owned_nodes(edges: np.ndarray, part: int, parts: int) -> np.ndarray:
    """The nodes a partition owns (sorted): every one appears in its scattered edges."""
    nodes = np.unique(edges)
    return nodes[owner(nodes, parts) == part]


def outbox_offsets(outbox: np.ndarray, parts: int) -> np.ndarray:
    """Offsets (parts + 1) of each destination's proposals in an outbox sorted by (owner, node)."""
    return np.searchsorted(owner(outbox[:, 0], parts), np.arange(parts + 1)) if outbox.shape[0] else \
        np.zeros(parts + 1, np.int64)


def lookup_labels(states: list[tuple[np.ndarray, np.ndarray]], x: np.ndarray, parts: int) -> np.ndarray:
    """Labels of nodes `x` in per-partition (nodes sorted, labels) states (arrays may be memory-mapped);
    a node a partition does not hold is its own label."""
    res = np.asarray(x, dtype=np.int64).copy()
    if not res.size:
        return res
    own = owner(res, parts)
    for q in np.unique(own).tolist():
        nodes, labels = states[q]
        sel = np.flatnonzero(own == q)
        if not len(nodes):
            continue
        i = np.minimum(np.searchsorted(nodes, res[sel]), len(nodes) - 1)
        found = np.asarray(nodes[i]) == res[sel]
        res[sel[found]] = np.asarray(labels[i[found]])
    return res


def round_part(part: int, parts: int, edges: np.ndarray, nodes: np.ndarray, labels: np.ndarray,
               inbox: np.ndarray, lookup: Callable[[np.ndarray], np.ndarray],
               hops: int = HOPS) -> tuple[np.ndarray, np.ndarray, bool]:
    """One round of partition `part` (see the module text): its scattered `edges`, its owned `nodes` and their
    `labels` after the previous round, the (node, label) proposals addressed to it, and `lookup(x)`: the
    previous-round labels of nodes owned elsewhere. Returns (new labels, outbox (k, 2) sorted by owner then
    node, changed: whether a label changed or a proposal was sent)."""
    lab = np.asarray(labels, dtype=np.int64).copy()
    if inbox.shape[0]:
        at = np.searchsorted(nodes, inbox[:, 0])
        if (at >= nodes.size).any() or (nodes[np.minimum(at, nodes.size - 1)] != inbox[:, 0]).any():
            raise ValueError(f"partition {part}: a label proposal names a node it does not own")
        np.minimum.at(lab, at, inbox[:, 1])

    def label_of(x: np.ndarray) -> np.ndarray:
        res = x.copy()
        mine = owner(x, parts) == part
        if mine.any():
            i = np.minimum(np.searchsorted(nodes, x[mine]), max(nodes.size - 1, 0))
            ok = nodes[i] == x[mine] if nodes.size else np.zeros(int(mine.sum()), bool)
            res[np.flatnonzero(mine)[ok]] = lab[i[ok]]
        if (~mine).any():
            res[~mine] = lookup(x[~mine])
        return res

    for _ in range(hops):      # pointer jumping: a label's label is never larger
        nxt = label_of(lab)
        if (nxt == lab).all():
            break
        lab = nxt
    touched = np.unique(edges)
    known = label_of(touched)
    local = np.unique(np.concatenate([touched, known]))
    pairs = np.concatenate([edges.reshape(-1, 2), np.stack([touched, known], axis=1)])
    smallest = local[components(local.size, np.searchsorted(local, pairs))]   # local indices follow node order
    new = smallest[np.searchsorted(local, nodes)] if nodes.size else lab
    foreign = owner(local, parts) != part
    fx, fm = local[foreign], smallest[foreign]
    better = fm < label_of(fx)
    outbox = np.stack([fx[better], fm[better]], axis=1)
    outbox = outbox[np.lexsort((outbox[:, 0], owner(outbox[:, 0], parts)))] if outbox.shape[0] else \
        np.zeros((0, 2), np.int64)
    changed = bool((new != labels).any()) or bool(outbox.shape[0])
    return new.astype(np.int64), outbox.astype(np.int64), changed


def partitioned_roots(edges: np.ndarray, parts: int, max_rounds: int = MAX_ROUNDS,
                      hops: int = HOPS) -> tuple[np.ndarray, np.ndarray, int]:
    """(nodes, component minimum of each node, rounds run) for the nodes that appear in an edge, computed in
    `parts` hash partitions by rounds (`round_part`): what `curation.core.graph.clustered_roots` computes in
    one piece. Raises NotConverged after `max_rounds` rounds without a fixed point."""
    edges = np.asarray(edges, dtype=np.int64).reshape(-1, 2)
    scattered = [scatter_part([edges], p, parts) for p in range(parts)]
    nodes = [owned_nodes(scattered[p], p, parts) for p in range(parts)]
    labels = [n.copy() for n in nodes]
    outboxes = [np.zeros((0, 2), np.int64)] * parts
    for r in range(1, max_rounds + 1):
        states = list(zip(nodes, labels))
        lookup = lambda x, states=states: lookup_labels(states, x, parts)  # noqa: E731 (last round's labels)
        offsets = [outbox_offsets(o, parts) for o in outboxes]
        results = []
        for p in range(parts):
            inbox = np.concatenate([o[off[p]:off[p + 1]] for o, off in zip(outboxes, offsets)])
            results.append(round_part(p, parts, scattered[p], nodes[p], labels[p], inbox,
                                      lookup, hops))
        labels = [lab for lab, _, _ in results]
        outboxes = [o for _, o, _ in results]
        if not any(changed for _, _, changed in results):
            all_nodes, all_labels = np.concatenate(nodes), np.concatenate(labels)
            order = np.argsort(all_nodes, kind="stable")
            return all_nodes[order], all_labels[order], r
    raise NotConverged(f"connected components: no fixed point after {max_rounds} rounds over {parts} partitions "
                       f"({edges.shape[0]} edges); raise the round limit or report the graph")
