"""The partitioned connected components give exactly the single-task components (`clustered_roots`,
today's clustering, and scipy's when installed) on random and adversarial graphs, for any partition count."""
from __future__ import annotations

import numpy as np
import pytest

from curation.core.graph import clustered_roots
from curation.core.partitioned_graph import (
    NotConverged,
    owner,
    partitioned_roots,
    scatter_part,
)

PARTS = (1, 2, 3, 8, 17)


def reference(edges: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    return clustered_roots(np.asarray(edges, dtype=np.int64).reshape(-1, 2))


def scipy_roots(edges: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    sparse = pytest.importorskip("scipy.sparse")
    csgraph = pytest.importorskip("scipy.sparse.csgraph")
    nodes = np.unique(edges)
    local = np.searchsorted(nodes, edges)
    m = sparse.coo_matrix((np.ones(len(local)), (local[:, 0], local[:, 1])), shape=(nodes.size, nodes.size))
    _, comp = csgraph.connected_components(m, directed=False)
    smallest = np.full(comp.max() + 1, np.iinfo(np.int64).max)
    np.minimum.at(smallest, comp, nodes)
    return nodes, smallest[comp]


def check(edges, parts: int) -> int:
    edges = np.asarray(edges, dtype=np.int64).reshape(-1, 2)
    want_nodes, want_roots = reference(edges)
    nodes, roots, rounds = partitioned_roots(edges, parts)
    assert nodes.tolist() == want_nodes.tolist()
    assert roots.tolist() == want_roots.tolist()
    return rounds


@pytest.mark.parametrize("seed", range(12))
@pytest.mark.parametrize("parts", PARTS)
def test_random_graphs_match_the_single_task_components(seed, parts):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(2, 400))
    m = int(rng.integers(1, 3 * n))
    edges = rng.integers(0, n, size=(m, 2)) * int(rng.integers(1, 1000))   # sparse ids, like global indices
    check(edges, parts)


def test_scipy_agrees_with_the_reference_on_a_random_graph():
    edges = np.random.default_rng(5).integers(0, 3000, size=(2500, 2))
    nodes, roots = scipy_roots(edges)
    want_nodes, want_roots = reference(edges)
    assert nodes.tolist() == want_nodes.tolist() and roots.tolist() == want_roots.tolist()
    got = partitioned_roots(edges, 8)
    assert got[0].tolist() == nodes.tolist() and got[1].tolist() == roots.tolist()


@pytest.mark.parametrize("parts", [p if p < 8 else pytest.param(p, marks=pytest.mark.slow) for p in PARTS])
def test_a_long_chain_crossing_every_partition_settles_in_few_rounds(parts):
    n = 10_000
    order = np.random.default_rng(1).permutation(n)     # a path visiting the nodes in random order
    edges = np.stack([order[:-1], order[1:]], axis=1)
    rounds = check(edges, parts)
    assert rounds <= 2 * int(np.log2(n)) + 3
    check(np.stack([np.arange(n - 1), np.arange(1, n)], axis=1), parts)     # and in index order, reversed
    check(np.stack([np.arange(1, n), np.arange(n - 1)], axis=1)[::-1], parts)


@pytest.mark.parametrize("parts", PARTS)
def test_stars_cliques_isolated_pairs_duplicates_and_self_loops(parts):
    star = np.stack([np.full(500, 7_000), np.arange(7_001, 7_501)], axis=1)          # centre is the minimum
    star_max = np.stack([np.full(500, 9_999), np.arange(8_000, 8_500)], axis=1)      # centre is the maximum
    k = np.arange(100, 160)
    clique = np.stack(np.meshgrid(k, k), axis=-1).reshape(-1, 2)                     # includes self-loops
    pairs = np.stack([np.arange(20_000, 20_400, 2), np.arange(20_001, 20_401, 2)], axis=1)
    loops = np.stack([np.arange(30_000, 30_050)] * 2, axis=1)                        # isolated nodes
    dup = np.repeat(pairs[:20], 5, axis=0)[:, ::-1]                                  # both orientations
    edges = np.concatenate([star, star_max, clique, pairs, loops, dup])
    check(edges, parts)
    check(edges[np.random.default_rng(3).permutation(len(edges))], parts)


@pytest.mark.parametrize("parts", (2, 8))
def test_components_bridged_only_across_partitions(parts):
    # two cliques in disjoint partitions joined by one edge between their largest members, and a ladder whose
    # rungs all cross partitions: the minimum must travel through every other partition
    nodes = np.arange(20_000)
    own = owner(nodes, parts)
    a, b = nodes[own == 0][:40], nodes[own == 1][:40]
    cliques = [np.stack(np.meshgrid(c, c), axis=-1).reshape(-1, 2) for c in (a, b)]
    bridge = np.array([[a.max(), b.max()]])
    ladder = np.stack([nodes[own == 0][100:600], nodes[own == parts - 1][100:600]], axis=1)
    rails = np.stack([ladder[:-1, 0], ladder[1:, 0]], axis=1)
    check(np.concatenate([*cliques, bridge, ladder, rails]), parts)


def test_empty_graph_and_one_edge():
    assert [x.tolist() for x in partitioned_roots(np.zeros((0, 2)), 4)[:2]] == [[], []]
    check([[5, 3]], 4)


def test_scatter_holds_about_one_part_of_the_edges_and_every_edge_once():
    edges = np.random.default_rng(0).integers(0, 10**6, size=(50_000, 2))
    edges = edges[edges[:, 0] != edges[:, 1]]
    parts = [scatter_part([edges[:20_000], edges[20_000:]], p, 8) for p in range(8)]
    real = [p[p[:, 0] != p[:, 1]] for p in parts]
    assert sum(len(p) for p in real) == len(np.unique(np.sort(edges, axis=1), axis=0))
    assert max(len(p) for p in real) < 1.1 * len(edges) / 8


def test_a_round_limit_too_low_is_a_clear_error():
    chain = np.stack([np.arange(5000), np.arange(1, 5001)], axis=1)[::-1]
    with pytest.raises(NotConverged, match="no fixed point after 1 rounds over 8 partitions"):
        partitioned_roots(chain, 8, max_rounds=1)
