"""Graph helpers shared by every dedup phase: connected components over edge lists, labelled by their smallest node."""
from __future__ import annotations

import numpy as np
import pyarrow as pa


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


def clustered_roots(edges: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(nodes, root of each node) for the nodes that appear in an edge; root = the component's smallest index.

    Only documents that have a near-duplicate are held, so memory follows the duplicates, not the corpus."""
    nodes = np.unique(edges)
    local = np.searchsorted(nodes, edges)
    return nodes, nodes[components(nodes.size, local)]


def groups(labels: np.ndarray) -> dict[int, list[int]]:
    """Root -> members (root first, then ascending) of every component with more than one node."""
    members: dict[int, list[int]] = {}
    for i in np.flatnonzero(labels != np.arange(labels.size)).tolist():
        root = int(labels[i])
        members.setdefault(root, [root]).append(i)
    return dict(sorted(members.items()))


def cluster_row(names, root: int, members: list[int]) -> dict:
    """The ledger row of one duplicate cluster: `names[i]` = (source, id) of member i (a list or a dict);
    the root is the kept member.

    Every dedup phase's cluster table has these columns (plus its own, such as the image domain)."""
    name = lambda j: f"{names[j][0]}/{names[j][1]}"  # noqa: E731
    return {"cluster": name(root), "kept_source": names[root][0], "kept_id": names[root][1], "size": len(members),
            "members": [name(j) for j in members], "sources": sorted({names[j][0] for j in members})}


CLUSTER_COLUMNS = [("cluster", pa.string()), ("kept_source", pa.string()), ("kept_id", pa.string()),
                   ("size", pa.int64()), ("members", pa.list_(pa.string())), ("sources", pa.list_(pa.string()))]


def key_components(keys, pairs) -> dict:
    """Cluster id of every key: the smallest key of its connected component under `pairs`
    ((key_a, key_b, ...) tuples); keys that only appear in pairs are included."""
    ordered = sorted(set(keys) | {p[0] for p in pairs} | {p[1] for p in pairs})
    index = {k: i for i, k in enumerate(ordered)}
    edges = np.array([(index[p[0]], index[p[1]]) for p in pairs], dtype=np.int64).reshape(-1, 2)
    labels = components(len(ordered), edges)
    return {k: ordered[labels[i]] for i, k in enumerate(ordered)}
