"""Classifiers refuse what they were not trained for (`curation.steps.text.filters.coverage`): the card's per-language
block, the planning-time refusal, the run-time quarantine or pass with reason, the ledger rows and the report."""
from __future__ import annotations

import json
import shutil

import pytest

from curation.core.record import Record
from curation.errors import RecipeError
from curation.plan.graph import load_plan
from curation.recipe.filters import QualityScore, Toxicity
from curation.report.quality import quality_sections
from curation.steps.text.filters.coverage import (
    NOT_COVERED,
    coverage_rows,
    declared_languages,
    languages_block,
)
from curation.steps.text.filters.quality import FastTextScorer, QualityStep, ToxicityStep
from tests.conftest import REPO, make_recipe, write_jsonl

MODELS = REPO / "recipes" / "classifiers" / "models"
QUALITY, TOXICITY = MODELS / "demo-quality.ftz", MODELS / "demo-toxicity.ftz"

# a clean Spanish parliament speech: the demo toxicity model saw no Spanish at all
ES = ("Señorías, el Gobierno presenta hoy ante esta Cámara el proyecto de ley de presupuestos generales del "
      "Estado para el próximo año, que refuerza la sanidad pública, la educación y las pensiones.")
EN = "Thanks for the article: I learned something new today about the history of the town library."
DE = "Danke für den Artikel: ich habe heute etwas Neues über die Geschichte der Stadtbibliothek gelernt."


def _recs(texts, meta=None):
    return [Record(id=str(i), source="s", text=t, meta=dict(meta or {})) for i, t in enumerate(texts)]


def _run(step, records):
    out = list(step.run(records))
    st = step.stats
    assert st.records_in == st.records_out + sum(st.dropped.values()) + sum(st.quarantined.values())
    return out


def test_the_shipped_cards_state_per_language_training_and_evaluation_and_what_they_cover():
    tox = json.loads((MODELS / "demo-toxicity.card.json").read_text())
    block = tox["languages"]
    assert block["covered"] == ["de", "en"] and block["min_documents"] == 20
    for lang in ("de", "en"):   # the numbers are the card's own training and held-out counts
        per = block["per_language"][lang]
        assert per["train_positives"] == tox["counts"]["train_before_weights"][lang]["toxic"] == 96
        assert per["train_negatives"] == tox["counts"]["train_before_weights"][lang]["clean"] == 96
        assert per["held_out"] == tox["held_out"]["metrics"]["per_language"][lang]
    assert "es" not in block["per_language"]
    q = json.loads((MODELS / "demo-quality.card.json").read_text())["languages"]
    assert q["covered"] == ["de", "en"]
    assert q["per_language"]["es"] == {"train_positives": 6, "train_negatives": 6, "covered": False,
                                       "held_out": q["per_language"]["es"]["held_out"]}
    assert q["per_language"]["ar"]["train_negatives"] == 0 and "ar" in q["one_sided_allowed"]


def test_languages_block_covers_only_languages_with_both_labels_above_the_minimum():
    train = {"en": {"toxic": 30, "clean": 25}, "nl": {"toxic": 230}, "fr": {"toxic": 19, "clean": 40}}
    held = {"en": {"documents": 10, "positives": 5, "precision": 1.0, "recall": 0.8, "auc": 0.9}}
    b = languages_block(train, held, ["toxic", "clean"], 20, ["nl"])
    assert b["covered"] == ["en"]
    assert b["per_language"]["nl"] == {"train_positives": 230, "train_negatives": 0, "covered": False, "held_out": None}
    assert b["per_language"]["fr"]["covered"] is False and b["per_language"]["en"]["held_out"] == held["en"]


def test_uncovered_language_is_quarantined_by_default_with_its_reason():
    step = ToxicityStep(Toxicity(type="toxicity", model=str(TOXICITY)))
    out = _run(step, _recs([EN, ES, DE]))
    assert [r.id for r in out] == ["0", "2"]
    assert step.stats.quarantined == {NOT_COVERED: 1} and not step.stats.dropped
    assert step.stats.notes["not_covered:es"] == 1 and "scored:es" not in step.stats.notes
    entry = step.sink.entries[0]
    assert entry["id"] == "1" and entry["reason"] == NOT_COVERED and "'es'" in entry["detail"]
    assert "['de', 'en']" in entry["detail"] and entry["raw"] == ES
    assert step.sink.decisions == [("toxicity", "1", "quarantined", NOT_COVERED, entry["detail"])]


def test_pass_lets_uncovered_documents_through_unscored_with_a_passed_decision():
    texts = [EN, ES, DE, ES]
    for batch in (1, 3, 256):
        step = ToxicityStep(Toxicity(type="toxicity", model=str(TOXICITY), uncovered_languages="pass",
                                     batch_size=batch))
        out = _run(step, _recs(texts))
        assert [r.id for r in out] == ["0", "1", "2", "3"]    # batch order kept
        assert step.stats.records_out == 4 and not step.stats.quarantined and not step.stats.dropped
        assert "toxicity_score" not in out[1].meta and "toxicity_score" not in out[3].meta
        # the covered ones get exactly the score the model gives them alone
        assert [out[0].meta["toxicity_score"], out[2].meta["toxicity_score"]] == \
            FastTextScorer(TOXICITY, "toxic").score([EN, DE])
        assert step.stats.notes["not_covered:es"] == 2 and step.stats.notes["scored:en"] == 1
        assert [d[:4] for d in step.sink.decisions] == [("toxicity", "1", "passed", NOT_COVERED),
                                                       ("toxicity", "3", "passed", NOT_COVERED)]


def test_the_quality_step_does_not_score_an_uncovered_language_either():
    step = QualityStep(QualityScore(type="quality", model=str(QUALITY), uncovered_languages="pass"))
    out = _run(step, _recs([EN, ES]))
    assert "quality_score" in out[0].meta and "quality_score" not in out[1].meta
    assert step.stats.notes == {"scored:en": 1, "not_covered:es": 1}
    refuse = QualityStep(QualityScore(type="quality", model=str(QUALITY)))
    assert [r.id for r in _run(refuse, _recs([EN, ES]))] == ["0"] and refuse.stats.quarantined == {NOT_COVERED: 1}


def test_a_card_without_the_languages_block_is_refused(tmp_path):
    shutil.copy(TOXICITY, tmp_path / "m.ftz")
    card = json.loads((MODELS / "demo-toxicity.card.json").read_text())
    del card["languages"]
    (tmp_path / "m.card.json").write_text(json.dumps(card))
    with pytest.raises(RecipeError, match=r"does not say which languages the model may judge.*curate classifier train"):
        ToxicityStep(Toxicity(type="toxicity", model=str(tmp_path / "m.ftz")))


def _spanish_recipe(tmp_path, extra: str = ""):
    path = write_jsonl(tmp_path / "es.jsonl", [{"id": "0", "text": ES}])
    filters = (f"[{{type: language, languages: [es, en]}}, {{type: toxicity, model: {TOXICITY}{extra}}}]")
    return make_recipe(tmp_path, {"parliament": [path]}, filters=filters)


def test_validation_refuses_a_declared_language_outside_the_card(tmp_path):
    with pytest.raises(RecipeError) as e:
        load_plan(_spanish_recipe(tmp_path))
    msg = str(e.value)
    assert "sources[0].filters[1] (toxicity)" in msg and "'parliament'" in msg
    assert "'demo-toxicity'" in msg and "covers only ['de', 'en']" in msg and "not covered: ['es']" in msg
    assert "uncovered_languages: pass" in msg and "remove them from the source's `language` filter" in msg
    plan = load_plan(_spanish_recipe(tmp_path, ", uncovered_languages: pass"))   # said on purpose: valid
    assert plan.process


def test_declared_languages_are_those_of_the_last_language_filter_before_the_step():
    lang = type("F", (), {"type": "language"})
    a, b, tox = lang(), lang(), type("T", (), {"type": "toxicity"})()
    a.languages, b.languages = ["en", "es", "de"], ["es", "de", "fr"]
    assert declared_languages([a, tox], 1) == ["en", "es", "de"]
    assert declared_languages([a, b, tox], 2) == ["es", "de"]
    assert declared_languages([tox, a], 0) is None


def test_coverage_rows_and_the_report_say_what_the_model_was_trained_and_evaluated_on():
    card = json.loads((MODELS / "demo-toxicity.card.json").read_text())
    cfg = Toxicity(type="toxicity", model=str(TOXICITY), uncovered_languages="pass")
    rows = coverage_rows("r", "src", "toxicity", cfg, card, {"scored:en": 5, "not_covered:es": 145})
    q = json.loads((MODELS / "demo-quality.card.json").read_text())
    qcfg = QualityScore(type="quality", model=str(QUALITY))
    # covered languages and those met; the quality card's stray languages (ar, ca, ...) are not listed
    assert [r["language"] for r in coverage_rows("r", "src", "quality", qcfg, q, {"not_covered:fr": 2})] == \
        ["de", "en", "fr"]
    by = {r["language"]: r for r in rows}
    assert sorted(by) == ["de", "en", "es"]
    assert by["en"] == {"run": "r", "source": "src", "step": "toxicity", "model": "demo-toxicity",
                             "language": "en", "covered": True, "train_positives": 96, "train_negatives": 96,
                             "held_out_documents": 48, "held_out_positives": 24, "held_out_precision": 1.0,
                             "held_out_recall": 1.0, "held_out_auc": 1.0, "scored": 5, "not_covered": 0,
                             "not_covered_outcome": None}
    assert by["es"]["covered"] is False and by["es"]["train_positives"] == 0 and by["es"]["not_covered"] == 145
    assert by["es"]["not_covered_outcome"] == "passed" and by["es"]["held_out_auc"] is None
    sec = next(s for s in quality_sections({"classifier_languages": rows})
               if s.title == "What the classifiers were trained and evaluated on")
    text = sec.table[0]   # the Markdown version (the HTML one is rendered from the same cells)
    assert "| src | toxicity | demo-toxicity | en | yes | 96 | 96 | 48 | 1.000 | 1.000 | 1.000 | 5 | 0 |" in text
    assert "| src | toxicity | demo-toxicity | es | no | 0 | 0 | 0 | n/a | n/a | n/a | 0 | 145 passed |" in text


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["pass", "refuse"])
def test_a_run_records_uncovered_documents_in_decisions_ledger_and_report(tmp_path, mode):
    """No `language` filter declares the source's languages, so the plan cannot refuse: the step's own
    language ID finds the Spanish speech, which passes unscored or is quarantined, with its reason."""
    from curation.commands.run import run
    from curation.ledger import query
    en = [f"{EN} Visitors came back on day {i} to read more about the old mill and the river." for i in range(3)]
    path = write_jsonl(tmp_path / "in.jsonl", [{"id": f"en{i}", "text": t} for i, t in enumerate(en)]
                       + [{"id": "es0", "text": ES}])
    recipe = make_recipe(tmp_path, {"s": [path]}, filters=(
        f"[{{type: toxicity, model: {TOXICITY}, threshold: 0.9, uncovered_languages: {mode}}}]"))
    res = run(recipe, tmp_path / "out", progress=False)
    ledger = tmp_path / "out" / "ledger"
    _, got = query(ledger, "SELECT id, step, outcome, reason FROM decisions ORDER BY id")
    outcome = "passed" if mode == "pass" else "quarantined"
    assert got == [("es0", "toxicity", outcome, NOT_COVERED)]
    step = next(s for s in res.rows["steps"] if s["step"] == "toxicity")
    assert step["records_in"] == 4 and step["records_in"] == step["records_out"] + step["dropped"] + step["quarantined"]
    assert (step["records_out"], step["quarantined"]) == ((4, 0) if mode == "pass" else (3, 1))
    _, cov = query(ledger, "SELECT language, covered, scored, not_covered, not_covered_outcome "
                           "FROM classifier_languages ORDER BY language")
    assert cov == [("de", True, 0, 0, None), ("en", True, 3, 0, None), ("es", False, 0, 1, outcome)]
    assert res.rows["tokens"][0]["documents"] == (4 if mode == "pass" else 3)
    md = (tmp_path / "out" / "reports" / "report.md").read_text()
    assert "What the classifiers were trained and evaluated on" in md
    assert f"| s | toxicity | demo-toxicity | es | no | 0 | 0 | 0 | n/a | n/a | n/a | 0 | 1 {outcome} |" in md


def test_a_selection_on_a_score_that_pass_leaves_unset_is_refused(tmp_path):
    path = write_jsonl(tmp_path / "in.jsonl", [{"id": "0", "text": EN}])
    quality = f"{{type: quality, model: {QUALITY}, uncovered_languages: pass}}"
    recipe = make_recipe(tmp_path, {"s": [path]}, filters=f"[{quality}]")
    recipe.write_text(recipe.read_text().replace("    filters:", "    select: {top_fraction: 0.5}\n    filters:"))
    with pytest.raises(RecipeError, match=r"uncovered_languages: pass.*unscored.*needs a score on every document"):
        load_plan(recipe)
    recipe.write_text(recipe.read_text().replace(", uncovered_languages: pass", ""))
    assert load_plan(recipe).process   # refuse (the default) leaves no document unscored


def test_a_threshold_for_a_language_the_model_does_not_cover_is_refused(tmp_path):
    path = write_jsonl(tmp_path / "in.jsonl", [{"id": "0", "text": EN}])
    tox = f"{{type: toxicity, model: {TOXICITY}, threshold: {{en: 0.6, es: 0.4, default: 0.5}}}}"
    recipe = make_recipe(tmp_path, {"s": [path]}, filters=f"[{tox}]")
    with pytest.raises(RecipeError, match=r"threshold\(s\) for \['es'\].*covers only \['de', 'en'\].*never scored"):
        load_plan(recipe)
    recipe.write_text(recipe.read_text().replace(", es: 0.4", ""))
    assert load_plan(recipe).process
