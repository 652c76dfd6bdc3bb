"""`Node.deps` names every node whose files a task reads: a task that stages its inputs from an output URL
fetches exactly its deps' outputs (`curation.runtime.publish`), and a scheduler starts a node when its deps
are done. On 32447ae four kinds of node read files of nodes they did not list."""
from __future__ import annotations

from curation.plan.graph import load_plan
from tests.conftest import TEXT_DEMO


def test_every_read_is_a_dep():
    plan = load_plan(TEXT_DEMO)
    by_phase: dict[str, list] = {}
    for n in plan.nodes():
        by_phase.setdefault(n.phase, []).append(n)
    process = {n.key for n in by_phase["process"]}
    final = {by_phase[name][0].key for name in ("exact", "clusters", "decont_resolve", "select_resolve")}
    for t in by_phase["tokenize"]:   # its shard, and the drop lists of every phase that covers it
        assert set(t.deps) == {f"process/{t.source}/{t.shard}", *final}, t.key
    exact = by_phase["exact"][0]                       # the resolved parts
    assert {n.key for n in by_phase["exact_resolve"]} == set(exact.deps)
    for scatter in by_phase["exact_scatter"]:           # every hash range's repeated keys
        assert {n.key for n in by_phase["exact_part"]} <= set(scatter.deps)
    for part in by_phase["exact_resolve"]:              # final labels, edges, and the duplicates' ids
        assert {n.key for n in by_phase["exact_settle"] + by_phase["exact_scatter"]} | process <= set(part.deps)
    for scatter in by_phase["cc_scatter"]:              # the band edges
        assert {n.key for n in by_phase["band"]} <= set(scatter.deps)
    for part in by_phase["cc_resolve"]:                 # final labels, signature sizes, ids and scores
        assert {n.key for n in by_phase["cc_settle"] + by_phase["signatures"]} | process <= set(part.deps)
    clusters = by_phase["clusters"][0]                 # the resolved parts
    assert {n.key for n in by_phase["cc_resolve"]} <= set(clusters.deps)
    resolve = by_phase["decont_resolve"][0]            # flags, the benchmark items, document counts
    assert {n.key for n in by_phase["decont"] + by_phase["decont_index"]} | process <= set(resolve.deps)


def test_sibling_tasks_that_read_every_shard_share_one_deps_list(tmp_path):
    """A partitioned phase's tasks each list every shard: one list object for all of them (and one key string
    per node, one settings dict per source), so the plan holds shards + tasks, not shards × partitions
    (tests/benchmarks/bench_plan_memory.py: 2.6 GB -> 76 MB at 8,000 shards)."""
    (tmp_path / "recipes").mkdir()   # the demo in several partitions (its 8 shards are one by default)
    for d in ("recipes/demo", "recipes/classifiers", "tokenizers"):
        (tmp_path / d).symlink_to(TEXT_DEMO.parent.parent / d)
    recipe = tmp_path / "recipes" / "text.yaml"
    recipe.write_text(TEXT_DEMO.read_text().replace("minhash: {", "minhash: {partitions: 3, ")
                      .replace("exact: {scope: global,", "exact: {partitions: 4, scope: global,"))
    plan = load_plan(recipe)
    by_phase: dict[str, list] = {}
    for n in plan.nodes():
        by_phase.setdefault(n.phase, []).append(n)
    for phase in ("band", "cc_scatter", "cc_resolve", "exact_part", "exact_scatter", "exact_resolve"):
        nodes = by_phase[phase]
        assert all(n.deps is nodes[0].deps for n in nodes), phase
    assert len(by_phase["cc_resolve"]) == 3 and len(by_phase["exact_part"]) == 4
    signatures = {n.key: n for n in by_phase["signatures"]}
    assert all(signatures[k].key is k for k in by_phase["band"][0].deps)   # the node's own key string
    for source in {n.source for n in by_phase["process"]}:
        mine = [n for n in by_phase["process"] + by_phase["tokenize"] if n.source == source]
        assert all(n.spec["source"] is mine[0].spec["source"] for n in mine)
