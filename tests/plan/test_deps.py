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
