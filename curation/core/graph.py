"""Graph helpers shared by every dedup phase: connected components over edge lists, labelled by their smallest node."""
from __future__ import annotations

import numpy as np


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
