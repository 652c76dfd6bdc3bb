"""Long-context stages: bucket filling by priority, short top-up, empty buckets, best-fit-decreasing packing."""
import numpy as np
import pytest
from pydantic import ValidationError

from curation.mixture.longcontext import best_fit_decreasing, fill_buckets
from curation.mixture.planning import plan_recipe
from curation.recipe.schema import Recipe

LENGTHS = {"de": np.array([100, 300, 700, 900, 50]), "en": np.array([800, 1000, 200, 120, 60])}


def test_buckets_fill_in_priority_order_with_whole_documents():
    counts, buckets = fill_buckets("lc", [256, 1024], [150, 1500], ["de", "en"], [], LENGTHS)
    b0, b1 = buckets
    assert b0.by_source == {"de": 150} and b0.realised_tokens == 150       # de alone reaches the target
    assert b1.by_source == {"de": 1900}                                   # 300 + 700 + 900, de first
    assert counts["en"].sum() == 0


def test_top_up_uses_shorter_documents_of_top_up_sources_and_reports_shortfalls():
    counts, buckets = fill_buckets("lc", [256, 2048], [0, 3500], ["de"], ["en"], LENGTHS)
    assert (buckets[0].realised_tokens, buckets[0].documents, buckets[0].by_source) == (0, 0, {})  # empty bucket
    b = buckets[1]
    assert b.filled_tokens == 1900 and b.topup_tokens == 380  # en's 200, 120, 60 are all it has under 256
    assert b.realised_tokens < b.target_tokens
    assert counts["en"].tolist() == [0, 0, 1, 1, 1]


def test_selection_is_deterministic_and_seeded_by_stage():
    big = {"de": np.arange(1, 400), "en": np.arange(1, 50)}
    a = fill_buckets("stage-a", [400], [5000], ["de"], [], big)[0]["de"]
    assert (a == fill_buckets("stage-a", [400], [5000], ["de"], [], big)[0]["de"]).all()
    assert not (a == fill_buckets("stage-b", [400], [5000], ["de"], [], big)[0]["de"]).all()


def test_best_fit_decreasing_packs_tightly_and_never_overflows():
    rows, bins = best_fit_decreasing([(6, 0, 0), (5, 0, 1), (4, 0, 2), (3, 0, 3), (2, 0, 4)], 10)
    assert bins == 2
    rng = np.random.default_rng(1)
    items = [(int(n), 0, i) for i, n in enumerate(rng.integers(1, 1024, 300))]
    rows, bins = best_fit_decreasing(items, 1024)
    load = np.zeros(bins, dtype=np.int64)
    for _src, doc, b in rows:
        load[b] += items[doc][0]
    assert load.max() <= 1024 and sorted(rows[:, 1].tolist()) == list(range(300))
    assert bins <= int(np.ceil(sum(i[0] for i in items) / 1024 * 11 / 9)) + 1  # BFD's 11/9 OPT bound


def test_long_context_stage_in_a_recipe():
    r = Recipe.model_validate({"name": "r", "vocabulary": "v", "sources": [
        {"name": "de", "license": "MIT", "input": {"paths": ["x"]}, "category": "German"},
        {"name": "en", "license": "MIT", "input": {"paths": ["x"]}},
        {"name": "unused", "license": "MIT", "input": {"paths": ["x"]}}],
        "stages": [{"name": "lc", "seq_length": 2048,
                    "long_context": {"buckets": [256, 2048], "targets": [100, 1500], "priority": ["de", "en"]}}]})
    lengths = {**LENGTHS, "unused": np.array([5])}
    tokens = {k: int(v.sum()) for k, v in lengths.items()}
    plan = plan_recipe(r, tokens, {k: len(v) for k, v in lengths.items()}, lengths=lengths.__getitem__)[0]
    rows = {x.source: x for x in plan.rows}
    assert rows["unused"].excluded == "not in this stage's priority or top_up"
    assert plan.budget_tokens == sum(x.effective_tokens for x in plan.rows)
    assert plan.long_context.sequences >= 1 and 0 < plan.long_context.fill <= 1
    assert not plan.flags


@pytest.mark.parametrize("lc, message", [
    ({"buckets": [512, 256], "targets": [1, 1], "priority": ["a"]}, "positive and ascending"),
    ({"buckets": [512], "targets": [1, 2], "priority": ["a"]}, "1 buckets but 2 targets"),
    ({"buckets": [8192], "targets": [1], "priority": ["a"]}, "exceeds seq_length"),
    ({"buckets": [512], "targets": [1], "priority": ["zz"]}, "unknown source(s) ['zz']"),
])
def test_long_context_errors(lc, message):
    with pytest.raises(ValidationError) as e:
        Recipe.model_validate({"name": "r", "vocabulary": "v", "sources": [{"name": "a", "license": "MIT",
                                                                            "input": {"paths": ["x"]}}],
                               "stages": [{"name": "lc", "seq_length": 4096, "long_context": lc}]})
    assert message in str(e.value)
