"""Exact dedup's survivor rule resolved by connected components of the document–key graph, in hash
partitions (`curation.corpus.exact_cc`), gives exactly the single-task rule (`partition.resolve` over every
repeated-key row, and the sequential oracle `tests/corpus/exact_oracle.py`): on random corpora, long
chains of records linked alternately by content and URL across partitions, stars, a dropped re-crawl
whose copy survives, both scopes, 1..16 partitions and empty input; in memory and as the phase's tasks."""
from __future__ import annotations

import json
import random

import numpy as np
import pytest

from curation.core.hashing import content_hash
from curation.core.layout import drops_path
from curation.core.node import Node
from curation.corpus.exact import ExactPhase, _groups, merge_parts, part_shared, plan_components, resolve_duplicates
from curation.corpus.exact_cc import edge_rows, key_edges, key_node, resolve_components
from curation.corpus.partition import range_slice, resolve, shard_keys, sort_keys
from curation.steps.droplist import read_drops
from tests.corpus.exact_oracle import sequential_duplicates
from tests.corpus.test_exact_partitions import _write_processed, generated

PARTS = (1, 2, 3, 5, 8, 16)


def ranges(shards, scope: str, parts: int) -> list[np.ndarray]:
    """The hash ranges' repeated-key rows, as the exact_part tasks write them."""
    keys = [sort_keys(shard_keys(h, u)) for _, _, h, _, u in shards]
    groups = _groups([(s, sh) for s, sh, *_ in shards], scope)
    return [part_shared([(n, groups[n], range_slice(k, p, parts)) for n, k in enumerate(keys)]) for p in range(parts)]


def chain(n: int, n_shards: int, seed: int):
    """n records, record i holding content A[i // 2] and URL B[(i + 1) // 2]: consecutive records share, in
    turn, a content and a URL key, so all n form one path, laid out over shards of two sources in a random
    canonical order. Whichever record of a pair comes first decides, and a record whose only earlier
    neighbour was dropped is kept: the rule alternates along the path."""
    rng = random.Random(seed)
    recs = [(content_hash(f"chain {seed} {i // 2}"), f"https://chain.example/{(i + 1) // 2}", f"r{i}") for i in range(n)]
    rng.shuffle(recs)
    per = -(-n // n_shards)
    shards = []
    for s in range(n_shards):
        part = recs[s * per:(s + 1) * per]
        shards.append((f"s{s % 2}", f"{s:05d}", [h for h, _, _ in part], [i for _, _, i in part], [u for _, u, _ in part]))
    return sorted(shards, key=lambda sh: (sh[0], sh[1]))


def star(n: int, n_shards: int):
    """One text copied n times (every other one also sharing one URL), and a URL shared by n pages."""
    shards = []
    for s in range(n_shards):
        m = n // n_shards
        hashes = [content_hash("the star") if i % 2 else content_hash(f"page {s} {i}") for i in range(m)]
        urls = ["https://star.example/" if i % 3 == 0 else None for i in range(m)]
        shards.append((f"s{s % 3}", f"{s:05d}", hashes, [f"{s}-{i}" for i in range(m)], urls))
    return sorted(shards, key=lambda sh: (sh[0], sh[1]))


def recrawl():
    """A(h1,u1) kept; B(h2,u1) re-crawl of A; C(h2,u2) kept (its content's only earlier copy, B, was dropped);
    D(h3,u2) re-crawl of C; E(h1) copy of A."""
    h = [content_hash(t) for t in ("one", "two", "three")]
    u1, u2 = "https://a.example/1", "https://a.example/2"
    return [("a", "0", [h[0], h[1]], ["A", "B"], [u1, u1]), ("b", "1", [h[1], h[2], h[0]], ["C", "D", "E"], [u2, u2, None])]


CORPORA = {"random": lambda: generated(5, n_shards=6, per=120), "chain": lambda: chain(300, 7, 1),
           "star": lambda: star(240, 6), "recrawl": recrawl,
           "empty": lambda: [("a", "0", [], [], []), ("b", "0", [], [], [])],
           "unique": lambda: [("a", "0", [content_hash(f"u{i}") for i in range(9)], [f"u{i}" for i in range(9)],
                               [None] * 9)]}


@pytest.mark.parametrize("scope", ["global", "source"])
@pytest.mark.parametrize("name", sorted(CORPORA))
def test_components_in_any_partition_count_give_the_single_task_rule(name, scope):
    shards = CORPORA[name]()
    want = sequential_duplicates(shards, scope)
    for parts in PARTS:
        rows = ranges(shards, scope, parts)
        assert np.array_equal(resolve_components(rows, parts), resolve(merge_parts(rows))), (parts, name)
        assert resolve_duplicates(shards, scope, parts) == want, (parts, name)


def test_the_adversarial_corpora_are_what_they_claim():
    rows = sequential_duplicates(chain(300, 7, 1), "global")
    assert {r["reason"] for r in rows} == {"exact_duplicate", "url_duplicate"} and 100 < len(rows) < 299
    both = chain(300, 7, 1)
    edges = np.concatenate([key_edges(p, s) for p, s in enumerate(ranges(both, "global", 4))])
    from curation.core.graph import clustered_roots
    nodes, roots = clustered_roots(edges)
    assert nodes.size == 300 + 299 and np.unique(roots).size == 1           # one path of 300 records
    assert [(r["id"], r["duplicate_of_id"]) for r in sequential_duplicates(recrawl(), "global")] == \
        [("B", "A"), ("D", "C"), ("E", "A")]
    assert sequential_duplicates(recrawl(), "source") == [
        {"source": "a", "shard": "0", "id": "B", "reason": "url_duplicate", "duplicate_of_source": "a",
         "duplicate_of_id": "A", "detail": "a/A"},
        {"source": "b", "shard": "1", "id": "D", "reason": "url_duplicate", "duplicate_of_source": "b",
         "duplicate_of_id": "C", "detail": "b/C"}]


def test_key_nodes_never_collide_with_documents_and_decode_to_their_rows():
    rng = np.random.default_rng(0)
    docs = rng.integers(0, 1 << 62, 500)
    keys, kinds = rng.integers(0, 1 << 39, 500), rng.integers(0, 2, 500)
    for part in (0, 1, 4095):
        nodes = key_node(part, kinds, keys)
        assert (nodes < 0).all() and np.unique(nodes).size == np.unique(np.stack([keys, kinds], 1), axis=0).shape[0]
        rows = edge_rows(key_edges(part, np.stack([docs, kinds, keys], axis=1)))
        assert np.array_equal(rows[:, :2], np.stack([docs, kinds], axis=1))
        assert np.array_equal(np.unique(rows[:, 2], return_inverse=True)[1].reshape(-1),
                              np.unique(np.stack([keys, kinds], 1), axis=0, return_inverse=True)[1].reshape(-1))
    assert (key_node(0, np.array([0]), np.array([0])) != key_node(1, np.array([0]), np.array([0]))).all()
    with pytest.raises(ValueError, match="more than 2"):
        key_node(0, np.array([0]), np.array([1 << 40]))


def run_phase_tasks(out, shards, scope: str, parts: int, seed: int = 0) -> dict:
    """Every task of the phase for one modality, planned by `plan_components`, each stage's tasks in a random
    order; returns the markers by stage."""
    _write_processed(out, shards)
    names = [(s, sh) for s, sh, *_ in shards]
    phase, runners, rng = ExactPhase(), ExactPhase().runners(), random.Random(seed)
    keys = [Node("exact_keys", s, sh, "fp", spec={"url": "url"}) for s, sh in names]
    rngs = [Node("exact_part", None, f"text-{p:04d}", f"fp{p}", spec={
        "modality": "text", "part": p, "partitions": parts, "scope": scope, "shards": names}) for p in range(parts)]
    final = Node("exact", None, "text", "fp", spec={"modality": "text", "partitions": parts, "shards": names})
    markers: dict[str, list] = {}
    for stage in [keys, rngs, *plan_components("text", parts, rngs, [], names), [final]]:
        stage = list(stage)
        rng.shuffle(stage)   # task order is not canonical order
        for node in stage:
            markers.setdefault(node.phase, []).append(json.loads(json.dumps(runners[node.phase](out, node))))
    assert phase.name == "exact"
    return markers


def _written(out, shards):
    return {(s, sh): list(read_drops(drops_path(out, "exact", s, sh)).items()) for s, sh, *_ in shards}


def _wanted(shards, scope):
    want = sequential_duplicates(shards, scope)
    return {(s, sh): [(r["id"], (r["reason"], r["detail"])) for r in want if (r["source"], r["shard"]) == (s, sh)]
            for s, sh, *_ in shards}


@pytest.mark.slow
@pytest.mark.parametrize("name,parts,scope", [("random", 1, "global"), ("random", 4, "source"), ("chain", 8, "global"),
                                              ("star", 3, "global"), ("recrawl", 2, "source"), ("empty", 3, "global")])
def test_the_phase_tasks_write_the_sequential_rules_drop_lists(tmp_path, name, parts, scope):
    shards = CORPORA[name]()
    markers = run_phase_tasks(tmp_path, shards, scope, parts)
    assert _written(tmp_path, shards) == _wanted(shards, scope)
    shared = sum(m["shared"] for m in markers["exact_part"])
    assert sum(m["rows"] for m in markers["exact_resolve"]) == shared          # each row resolved once
    assert markers["exact"][0]["duplicates"] == len(sequential_duplicates(shards, scope))
    if name == "chain":   # one path: its label chains need more rounds than the plan's two
        assert markers["exact_settle"][0]["rounds"] > 2


@pytest.mark.slow
def test_a_resolve_task_holds_about_one_partitions_share_of_the_rows(tmp_path):
    shards = generated(6, n_shards=8, per=400, texts=2000, urls=2000)   # many small components
    markers = run_phase_tasks(tmp_path, shards, "global", 8)
    rows = [m["rows"] for m in markers["exact_resolve"]]
    assert _written(tmp_path, shards) == _wanted(shards, "global")
    assert max(rows) < 1.5 * sum(rows) / 8, rows
