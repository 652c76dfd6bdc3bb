"""The mixture planner: epochs, effective tokens, shares, exhaustion, infeasible targets, frozen stages."""
import pytest
from pydantic import ValidationError

from curation.mixture.manifests import stage_fingerprint
from curation.mixture.planning import plan_stage
from curation.recipe.schema import Recipe


def _recipe(stages, sources=None):
    sources = sources or [{"name": "en", "category": "English Web"}, {"name": "de", "category": "German"},
                          {"name": "code", "category": "Code", "max_epochs": 2}]
    for s in sources:
        s.setdefault("input", {"paths": ["x"]})
        s.setdefault("license", "MIT")
    return Recipe.model_validate({"name": "r", "vocabulary": "v", "sources": sources, "stages": stages})


TOKENS = {"en": 1000, "de": 200, "code": 100}
DOCS = {"en": 10, "de": 2, "code": 1}


def _plan(stage: dict):
    r = _recipe([{"name": "s", **stage}])
    return plan_stage(r.stages[0], r.sources, TOKENS, DOCS)


def _rows(p):
    return {r.source: r for r in p.rows}


def test_weights_share_the_budget_and_epochs_follow():
    p = _plan({"budget_tokens": 2600, "mixture": {"en": {"weight": 2}, "de": {"weight": 1}, "code": {"epochs": 1}}})
    r = _rows(p)
    assert (r["code"].effective_tokens, r["en"].effective_tokens, r["de"].effective_tokens) == (100, 1667, 833)
    assert r["en"].epochs == pytest.approx(2500 * 2 / 3 / 1000, rel=1e-5) and r["de"].epochs == pytest.approx(2500 / 3 / 200, rel=1e-5)
    assert sum(x.share for x in p.rows) == pytest.approx(1)
    assert r["de"].exhausted_at_tokens is not None  # 4.17 epochs > the default 4
    assert [f["kind"] for f in p.flags] == ["over_repetition"]


def test_shares_are_of_the_whole_effective_tokens_the_manifest_states():
    # 1000 tokens by weights 1:2 are 333.3 and 666.7, stated as 333 and 667: the shares are 0.333 and
    # 0.667 (what `curate verify` recomputes from the stated integers), not 1/3 and 2/3
    p = _plan({"budget_tokens": 1000, "mixture": {"en": {"weight": 1}, "de": {"weight": 2}}})
    r = _rows(p)
    assert (r["en"].effective_tokens, r["de"].effective_tokens) == (333, 667)
    assert (r["en"].share, r["de"].share, r["code"].share) == (0.333, 0.667, 0.0)


def test_exhaustion_point_under_proportional_blending():
    p = _plan({"budget_tokens": 1000, "mixture": {"en": {"weight": 1}, "code": {"weight": 1}}})
    code = _rows(p)["code"]
    # code gets 500 tokens = 5 epochs of 100, but may repeat only 2: at share 0.5 it is used up
    # after 2 × 100 / 0.5 = 400 stage tokens
    assert (code.epochs, code.exhausted_at_tokens) == (5.0, 400)
    flag = next(f for f in p.flags if f["kind"] == "over_repetition")
    assert flag["source"] == "code" and "runs out at token 400 of 1,000 (40.0% of the stage)" in flag["message"]
    assert _rows(p)["en"].exhausted_at_tokens is None


def test_zero_epoch_and_unlisted_sources_keep_their_rows():
    p = _plan({"budget_tokens": 500, "mixture": {"en": {"weight": 1}, "de": {"epochs": 0}}})
    r = _rows(p)
    assert set(r) == {"en", "de", "code"}
    assert (r["de"].effective_tokens, r["de"].share, r["de"].excluded) == (0, 0.0, "0 epochs")
    assert r["code"].excluded == "not in this stage's mixture" and r["code"].raw_tokens == 100
    assert r["en"].effective_tokens == 500


def test_category_targets_steer_weights_and_flag_the_unreachable():
    p = _plan({"budget_tokens": 1000, "mixture": {"en": {"weight": 1}, "de": {"weight": 1}},
               "category_targets": {"German": 0.3}})
    r = _rows(p)
    assert (r["de"].effective_tokens, r["en"].effective_tokens) == (300, 700)
    assert r["de"].target_share == 0.3 and not p.flags
    p = _plan({"budget_tokens": 1000, "mixture": {"en": {"weight": 1}, "de": {"weight": 1, "max_epochs": 1}},
               "category_targets": {"German": 0.5}})
    kinds = {f["kind"]: f for f in p.flags}
    assert "target_unreachable" in kinds and "at most 200" in kinds["target_unreachable"]["message"]
    cats = {c["category"]: c for c in p.categories()}
    assert cats["German"]["share"] == pytest.approx(0.5) and cats["German"]["target_share"] == 0.5


def test_fixed_epochs_over_budget_are_flagged():
    p = _plan({"budget_tokens": 500, "mixture": {"en": {"epochs": 1}}})
    assert [f["kind"] for f in p.flags] == ["budget_exceeded"]


def test_without_budget_each_weighted_source_is_one_epoch():
    r = _recipe([{"name": "s"}], [{"name": "en"}, {"name": "de", "weight": 0}])
    p = plan_stage(r.stages[0], r.sources, {"en": 10, "de": 5}, {"en": 1, "de": 1})
    assert [(x.source, x.epochs, x.effective_tokens, x.excluded) for x in p.rows] == [
        ("en", 1.0, 10, None), ("de", 0.0, 0, "0 epochs")]
    assert p.budget_tokens == 10


@pytest.mark.parametrize("stage, message", [
    ({"mixture": {"en": {"weight": 1, "epochs": 1}}}, "exactly one of weight: or epochs:"),
    ({"budget_tokens": 9, "mixture": {"xx": {"weight": 1}}}, "mixes unknown source(s) ['xx']"),
    ({"mixture": {"en": {"weight": 1}}}, "blends by weight, so it needs budget_tokens"),
    ({"budget_tokens": 9, "category_targets": {"Math": 0.1}}, "targets unknown categor"),
    ({"budget_tokens": 9, "category_targets": {"German": 0.7, "Code": 0.6}}, "add up to 1.300 > 1"),
])
def test_stage_errors(stage, message):
    with pytest.raises(ValidationError, match=None) as e:
        _recipe([{"name": "s", **stage}])
    assert message in str(e.value)


def test_stage_fingerprint_freezes_the_source_list():
    r = _recipe([{"name": "s", "budget_tokens": 1000, "mixture": {"en": {"weight": 1}, "de": {"weight": 1}}}])
    def entries(rows, shas=("a", "b")):
        return [{"name": x.source, "epochs": x.epochs, "effective_tokens": x.effective_tokens,
                 "files": [{"sha256": shas[0]}, {"sha256": shas[1]}]} for x in rows]
    base = plan_stage(r.stages[0], r.sources, TOKENS, DOCS)
    fp = stage_fingerprint(r.stages[0], entries(base.rows))
    assert stage_fingerprint(r.stages[0], entries(base.rows)) == fp
    assert stage_fingerprint(r.stages[0], entries(base.rows, ("a", "c"))) != fp       # a shard changed
    assert stage_fingerprint(r.stages[0], entries(base.rows[:2])) != fp               # a source removed
    r2 = _recipe([{"name": "s", "budget_tokens": 1000, "mixture": {"en": {"weight": 2}, "de": {"weight": 1}}}])
    other = plan_stage(r2.stages[0], r2.sources, TOKENS, DOCS)
    assert stage_fingerprint(r2.stages[0], entries(other.rows)) != fp                 # re-weighted


def test_sources_row_says_why_a_source_is_excluded():
    from curation.mixture.planning import mark_inclusion

    r = _recipe([{"name": "a", "budget_tokens": 100, "mixture": {"en": {"weight": 1}, "de": {"epochs": 0}}},
                 {"name": "b", "budget_tokens": 100, "mixture": {"en": {"weight": 1}}}])
    tokens = {"en": 50, "de": 20, "code": 0}
    plans = [plan_stage(st, r.sources, tokens, DOCS) for st in r.stages]
    rows = [{"source": s} for s in ("en", "de", "code")]
    mark_inclusion(rows, plans)
    assert rows[0] == {"source": "en", "included": True}
    assert rows[1] == {"source": "de", "included": False,
                       "excluded_reason": "0 epochs; not in this stage's mixture"}
    assert rows[2]["excluded_reason"] == "no documents survived curation"


def test_manifests_of_removed_stages_are_deleted(tmp_path):
    from curation.mixture.manifests import FORMAT, _remove_stale

    mdir = tmp_path / "manifests"
    for folder in (mdir / "plans", tmp_path / "megatron"):
        (folder / "old").mkdir(parents=True)
        (folder / "keep").mkdir(parents=True)
    (mdir / "old.json").write_text(f'{{"format": "{FORMAT}"}}')
    (mdir / "older.json").write_text('{"format": "curate-manifest/1"}')      # an earlier format of ours
    (mdir / "keep.json").write_text(f'{{"format": "{FORMAT}"}}')
    _remove_stale(tmp_path, {"keep"})
    assert sorted(p.name for p in mdir.iterdir()) == ["keep.json", "plans"]
    assert [p.name for p in (mdir / "plans").iterdir()] == ["keep"]
    assert [p.name for p in (tmp_path / "megatron").iterdir()] == ["keep"]   # the stage's Megatron hand-off
    (mdir / "notes.json").write_text("[1, 2]")
    _remove_stale(tmp_path, {"keep"})
    assert (mdir / "notes.json").exists()
