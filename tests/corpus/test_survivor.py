"""The MinHash survivor rule with scores (`dedup.minhash.keep: highest_quality`): the best-scored member
of a cluster survives, ties go to the earliest (source order, shard, row), an earlier run's document
always survives, and the rule is part of the clusters node's fingerprint."""
from __future__ import annotations

import json

import numpy as np
import pytest

from curation.commands.run import run
from curation.corpus.minhash import highest_quality
from curation.plan.graph import load_plan
from tests.conftest import VOCAB, english_doc, write_jsonl


def test_highest_score_then_earliest_and_earlier_runs_always_survive():
    nodes = np.array([0, 3, 4, 5, 6, 7, 8, 10, 11])        # as `clustered_roots` gives them: ascending
    roots = np.array([0, 3, 3, 3, 0, 7, 7, 10, 10])        # each component's smallest member
    scores = np.array([-np.inf, 0.1, 0.9, 0.9, 0.99, 0.3, 0.2, 0.4, 0.4])
    # 0-6: 0 is an earlier run's document (index < 3) and survives whatever 6 scores; 3-4-5: 4 and 5 tie
    # at 0.9, 4 is earlier; 7-8: 7 scores more; 10-11 tie: 10
    assert highest_quality(roots, nodes, scores, indexed=3).tolist() == [0, 4, 4, 4, 0, 7, 7, 10, 10]


def _recipe(tmp, scores_a, scores_b, keep: str):
    """Two sources of near-duplicate documents (MinHash normalises the numbers that tell them apart)."""
    def rows(prefix, scores, start):
        return [{"id": f"{prefix}{i}", "text": english_doc(start + i), "q": s} for i, s in enumerate(scores)]
    a = write_jsonl(tmp / "a.jsonl", rows("a", scores_a, 0))
    b = write_jsonl(tmp / "b.jsonl", rows("b", scores_b, 10))
    minhash = "{}" if keep == "earliest" else f"{{keep: {keep}, score_field: q}}"
    lines = ["name: t", f"vocabulary: {VOCAB}", f"dedup: {{exact: {{scope: global}}, minhash: {minhash}}}", "sources:"]
    for name, path in (("a", a), ("b", b)):
        lines += [f"  - name: {name}", "    license: MIT", "    allow_empty: true",   # one cluster: one survivor
                  f"    input: {{paths: [{json.dumps(str(path))}], id_field: id, metadata_fields: [q]}}"]
    path = tmp / f"{keep}.yaml"
    path.write_text("\n".join(lines) + "\n")
    return path


def _survivors(res) -> list[tuple[str, str, int]]:
    return [(c["kept_source"], c["kept_id"], c["size"]) for c in res.rows["clusters"]]


@pytest.mark.slow
def test_the_survivor_of_a_cluster_is_its_best_scored_document(tmp_path):
    earliest = run(_recipe(tmp_path, [0.2, 0.7], [0.7, 0.1], "earliest"), tmp_path / "e", progress=False)
    best = run(_recipe(tmp_path, [0.2, 0.7], [0.7, 0.1], "highest_quality"), tmp_path / "q", progress=False)
    assert _survivors(earliest) == [("a", "a0", 4)]
    assert _survivors(best) == [("a", "a1", 4)]              # a1 and b0 tie at 0.7: a comes first
    assert sorted(d["id"] for d in best.rows["near_duplicates"]) == ["a0", "b0", "b1"]
    assert {d["cluster"] for d in best.rows["near_duplicates"]} == {"a/a1"}
    other = run(_recipe(tmp_path, [0.2, 0.7], [0.9, 0.1], "highest_quality"), tmp_path / "o", progress=False)
    assert _survivors(other) == [("b", "b0", 4)]
    kept = {t["source"]: t["documents"] for t in other.rows["tokens"]}
    assert kept == {"a": 0, "b": 1}


def test_the_rule_is_in_the_clusters_fingerprint(tmp_path):
    plans = [load_plan(_recipe(tmp_path, [0.2], [0.3], keep)) for keep in ("earliest", "highest_quality")]
    fp = [{n.key: n.fingerprint for n in p.nodes()} for p in plans]
    moved = {k for k in fp[0] if fp[0][k] != fp[1][k]}
    assert "clusters" in moved and not any(k.startswith(("signatures/", "band/", "process/")) for k in moved)
