"""The quality and toxicity record steps, applying the committed demo models (recipes/classifiers/models)."""
from __future__ import annotations

import json
import shutil

import pytest
from pydantic import TypeAdapter, ValidationError

from curation.core.record import QuarantineSink, Record
from curation.errors import RecipeError
from curation.recipe.filters import FilterConfig, QualityScore, Toxicity
from curation.steps.text.filters.quality import FastTextScorer, QualityStep, ToxicityStep
from curation.steps.text.modality import build_filter
from tests.conftest import REPO

MODELS = REPO / "recipes" / "classifiers" / "models"
QUALITY, TOXICITY = MODELS / "demo-quality.ftz", MODELS / "demo-toxicity.ftz"
CFG = TypeAdapter(FilterConfig)

PROSE = ("The city council approved the new budget on Tuesday after a long debate. The plan raises spending "
         "on schools and public transport, and the mayor said the decision would help families.")
NAV = "Home | Login | Cart\nShop now\nClick here\nHome | Login"
DE = ("Der Stadtrat hat am Dienstag nach langer Debatte den neuen Haushalt beschlossen. Der Plan erhöht die "
      "Ausgaben für Schulen und den Nahverkehr.")


def _recs(texts, meta=None):
    return [Record(id=str(i), source="s", text=t, meta=dict(meta or {})) for i, t in enumerate(texts)]


def _run(step, records):
    out = list(step.run(records))
    st = step.stats
    assert st.records_in == st.records_out + sum(st.dropped.values()) + sum(st.quarantined.values())
    return out


def test_quality_step_puts_the_score_in_metadata_whatever_the_batch():
    texts = [PROSE, NAV, DE] * 5
    scores = []
    for batch in (1, 4, 256):
        step = QualityStep(QualityScore(type="quality", model=str(QUALITY), field="q", batch_size=batch))
        out = _run(step, _recs(texts))
        assert len(out) == len(texts) and not step.stats.dropped
        scores.append([r.meta["q"] for r in out])
        assert all(isinstance(s, float) and 0 < s < 1.0000101 for s in scores[-1])
        assert all(isinstance(r.meta["language"], str) for r in out)  # set by the step's own LID
    assert scores[0] == scores[1] == scores[2]
    assert scores[0] == FastTextScorer(QUALITY, "hq").score(texts)
    assert out[0].meta["language"] == "en" and out[2].meta["language"] == "de"


def test_quality_step_keeps_a_language_set_by_an_earlier_filter():
    step = QualityStep(QualityScore(type="quality", model=str(QUALITY)))
    # English text labelled `de` upstream: the step trusts the label (no LID of its own), and de is covered
    out = _run(step, _recs([PROSE], {"language": "de", "language_score": 0.9}))
    assert out[0].meta["language"] == "de" and "quality_score" in out[0].meta


def test_a_model_trained_for_another_label_set_is_refused():
    with pytest.raises(RecipeError) as e:
        QualityStep(QualityScore(type="quality", model=str(TOXICITY)))
    msg = str(e.value)
    assert "['clean', 'toxic']" in msg and "['hq', 'lq']" in msg and "toxicity" in msg
    with pytest.raises(RecipeError, match=r"\['hq', 'lq'\].*\['clean', 'toxic'\]"):
        ToxicityStep(Toxicity(type="toxicity", model=str(QUALITY)))


def test_a_card_of_another_model_or_no_card_is_refused(tmp_path):
    shutil.copy(QUALITY, tmp_path / "m.ftz")
    with pytest.raises(RecipeError, match="model card .* not found"):
        QualityStep(QualityScore(type="quality", model=str(tmp_path / "m.ftz")))
    shutil.copy(MODELS / "demo-toxicity.card.json", tmp_path / "m.card.json")
    with pytest.raises(RecipeError, match="describes another model file"):
        QualityStep(QualityScore(type="quality", model=str(tmp_path / "m.ftz")))


def test_toxicity_drops_with_reason_toxic_and_counts_per_language():
    texts = ["You are a pathetic idiot, so shut up.", "Thanks for the article: I learned something new today.",
             "Du bist ein erbärmlicher Versager, also halt die Klappe.", "Danke für den Artikel: eine Quelle wäre hilfreich."]
    step = ToxicityStep(Toxicity(type="toxicity", model=str(TOXICITY)))
    out = _run(step, _recs(texts))
    assert [r.text for r in out] == [texts[1], texts[3]]
    assert step.stats.dropped == {"toxic": 2}
    assert step.stats.notes == {"scored:en": 2, "scored:de": 2, "toxic:en": 1, "toxic:de": 1}
    assert all(r.meta["toxicity_score"] < 0.5 for r in out)



def test_toxicity_counts_per_language_become_ledger_rows():
    from curation.ledger.schema import SCHEMAS
    from curation.steps.registry import LEDGER_STEPS
    texts = ["You are a pathetic idiot, so shut up.", "Thanks for the article: I learned something new today.",
             "Du bist ein erbärmlicher Versager, also halt die Klappe."]
    step = ToxicityStep(Toxicity(type="toxicity", model=str(TOXICITY)))
    _run(step, _recs(texts))
    assert ToxicityStep in LEDGER_STEPS and "toxicity" in SCHEMAS
    assert ToxicityStep.ledger_rows("run", "src", step.stats) == {"toxicity": [
        {"run": "run", "source": "src", "language": "de", "scored": 1, "toxic": 1, "toxic_share": 1.0},
        {"run": "run", "source": "src", "language": "en", "scored": 2, "toxic": 1, "toxic_share": 0.5}]}

def test_toxicity_thresholds_per_language():
    texts = ["You are a pathetic idiot, so shut up.", "Du bist ein erbärmlicher Versager, also halt die Klappe."]
    scores = FastTextScorer(TOXICITY, "toxic").score(texts)
    cfg = Toxicity(type="toxicity", model=str(TOXICITY), threshold={"en": 0.0, "de": 1.0, "default": 0.5}, field=None)
    step = ToxicityStep(cfg)
    assert scores[1] < 1.0   # so the German one stays under its threshold
    recs = _recs(texts, {"language": "en"})
    recs[1].meta["language"] = "de"
    out = _run(step, recs)
    assert [r.id for r in out] == ["1"] and "toxicity_score" not in out[0].meta
    assert step.threshold("fr") == 0.5 and step.threshold("de_Latn") == 1.0


def test_recipe_configs_validate_and_build_through_the_registry():
    q = CFG.validate_python({"type": "quality", "model": "classifiers/models/demo-quality.ftz"})
    assert isinstance(q, QualityScore) and q.field == "quality_score" and q.labels == ["hq", "lq"]
    step = build_filter(q, source="s", sink=QuarantineSink(), base_dir=REPO / "recipes")
    assert isinstance(step, QualityStep)
    t = CFG.validate_python({"type": "toxicity", "model": "x.ftz", "threshold": {"en": 0.4, "default": 0.5}})
    assert t.threshold == {"en": 0.4, "default": 0.5}
    with pytest.raises(ValidationError, match="needs a `default` entry"):
        CFG.validate_python({"type": "toxicity", "model": "x.ftz", "threshold": {"en": 0.4}})
    with pytest.raises(ValidationError, match=r"must lie in \[0, 1\]"):
        CFG.validate_python({"type": "toxicity", "model": "x.ftz", "threshold": 1.5})
    with pytest.raises(ValidationError):
        CFG.validate_python({"type": "quality", "model": "x.ftz", "treshold": 1})


def test_a_record_that_cannot_be_scored_meets_on_error_and_the_rest_are_scored():
    step = QualityStep(QualityScore(type="quality", model=str(QUALITY), on_error="quarantine"))
    out = _run(step, _recs([PROSE, "bad \udc80 surrogate", DE]))
    assert [r.id for r in out] == ["0", "2"]
    assert sum(step.stats.quarantined.values()) == 1 and len(step.sink.entries) == 1


def test_card_of_the_shipped_demo_model_matches_it():
    card = json.loads((MODELS / "demo-quality.card.json").read_text())
    from curation.core.hashing import sha256_file
    assert card["model"]["sha256"] == sha256_file(QUALITY) and card["model"]["bytes"] < 300_000
