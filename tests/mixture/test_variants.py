"""Stages draw a source from the shard set they are for: `reasoning: strip` the copy without reasoning spans,
long-context stages an audio source's long-context pool; planning, manifest and hand-off agree."""
from __future__ import annotations

import json

import numpy as np
import pytest

from curation.mixture.planning import plan_recipe
from curation.mixture.variants import shard_variant
from curation.recipe.schema import Recipe
from tests.conftest import VOCAB, write_jsonl

LENGTHS = {("sft", ""): np.array([40, 60, 80]), ("sft", ".no_reasoning"): np.array([25, 60, 50]),
           ("speech", ""): np.array([300, 500]), ("speech", ".long_context"): np.array([1500, 1900, 900])}


def _recipe() -> Recipe:
    return Recipe.model_validate({"name": "r", "vocabulary": "v", "sources": [
        {"name": "sft", "license": "MIT", "input": {"paths": ["x"]}, "reasoning": {}},
        {"name": "speech", "license": "MIT", "modality": "audio", "optout": "not_available",
         "input": {"format": "audio", "paths": ["x"]}}],
        "stages": [{"name": "keep"}, {"name": "strip", "reasoning": "strip"},
                   {"name": "lc", "seq_length": 2048,
                    "long_context": {"buckets": [1024, 2048], "targets": [500, 3000], "priority": ["speech"]}}]})


def test_each_stage_plans_on_the_shard_set_it_draws():
    r = _recipe()
    assert [[shard_variant(st, s) for s in r.sources] for st in r.stages] == [
        ["", ""], [".no_reasoning", ""], ["", ".long_context"]]
    tokens = {s: int(LENGTHS[s, ""].sum()) for s in ("sft", "speech")}
    docs = {s: LENGTHS[s, ""].size for s in ("sft", "speech")}
    keep, strip, lc = plan_recipe(r, tokens, docs, lengths=lambda s, suffix="": LENGTHS[s, suffix])
    assert {x.source: x.raw_tokens for x in keep.rows} == {"sft": 180, "speech": 800}
    assert {x.source: x.raw_tokens for x in strip.rows} == {"sft": 135, "speech": 800}   # the stripped copy
    assert lc.long_context.counts["speech"].size == 3                                     # the long-context pool
    assert {b.upper: b.by_source for b in lc.long_context.buckets} == {1024: {"speech": 900},
                                                                       2048: {"speech": 3400}}
    with pytest.raises(ValueError, match="pass `lengths`"):
        plan_recipe(r, tokens, docs)


@pytest.mark.slow
def test_a_strip_stage_trains_on_the_copy_without_reasoning(tmp_path):
    from curation.commands.run import run
    from curation.mixture.manifests import verify_manifest
    from curation.shards import read_index
    rows = [{"id": f"a{i}", "text": f"Question {i}: two plus two? <think>2 + 2 is 4, check {i}.</think> Four."}
            for i in range(6)]
    path = write_jsonl(tmp_path / "sft.jsonl", rows)
    (tmp_path / "r.yaml").write_text(f"""name: sft
vocabulary: {VOCAB}
stages: [{{name: full, seq_length: 16, handoff: blend}}, {{name: stripped, seq_length: 16, reasoning: strip, handoff: blend}}]
sources:
  - name: sft
    license: MIT
    input: {{paths: [{path}], id_field: id}}
    reasoning: {{start: "<think>", end: "</think>"}}
""")
    res = run(tmp_path / "r.yaml", tmp_path / "out", progress=False)
    full, stripped = (json.loads(p.read_text()) for p in res.manifests)
    for m, variant in ((full, ""), (stripped, ".no_reasoning")):
        (s,) = m["sources"]
        assert s["variant"] == variant and s["prefix"] == f"../tokenized/sft/sft{variant}"
        lengths = read_index(tmp_path / "out" / "tokenized" / "sft" / f"sft{variant}.idx")[1]
        assert s["tokens"]["total"] == s["plan"]["tokens"] == int(lengths.sum())      # one epoch of that copy
        assert m["megatron"]["prefixes"][0]["prefix"] == s["prefix"]                 # read by Megatron as is
    assert stripped["sources"][0]["tokens"]["total"] < full["sources"][0]["tokens"]["total"]
    for manifest in res.manifests:
        verify_manifest(manifest)
    mixture = {r["stage"]: r["raw_tokens"] for r in res.rows["mixture"]}
    assert mixture == {"full": full["sources"][0]["tokens"]["total"], "stripped": stripped["sources"][0]["tokens"]["total"]}
