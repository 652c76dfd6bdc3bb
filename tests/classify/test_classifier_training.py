"""`curate classifier train`: deterministic models, the card, toxicity from labelled JSONL, the CLI."""
from __future__ import annotations

import hashlib
import json

import pytest

from curation.classify import load_spec, train_classifier
from curation.commands.cli import main
from curation.core.hashing import sha256_file
from curation.errors import RecipeError
from curation.steps.text.filters.quality import FastTextScorer, card_path


@pytest.mark.slow
def test_training_twice_gives_identical_model_bytes_card_and_predictions(quality_spec, tmp_path):
    a = train_classifier(quality_spec, tmp_path / "a")
    b = train_classifier(quality_spec, tmp_path / "b")
    assert a.model.read_bytes() == b.model.read_bytes()
    assert a.card_path.read_bytes() == b.card_path.read_bytes()
    texts = [line.split(" ", 1)[1] for line in (tmp_path / "a" / "tq.train.txt").read_text().splitlines()]
    assert FastTextScorer(a.model, "hq").score(texts) == FastTextScorer(b.model, "hq").score(texts)


@pytest.mark.slow
def test_card_records_pools_counts_proxy_band_hyperparameters_and_metrics(quality_spec, tmp_path):
    t = train_classifier(quality_spec, tmp_path / "m")
    c = json.loads(card_path(t.model).read_text())
    assert c["task"] == "quality" and c["labels"] == ["hq", "lq"] and c["score_label"] == "hq"
    assert c["curate_version"] and c["seed"] == 3
    assert c["model"]["sha256"] == sha256_file(t.model)
    pools = {p["name"]: p for p in c["pools"]}
    good = quality_spec.parent / "pools" / "good.jsonl"
    assert pools["good"]["files"] == [{"path": "pools/good.jsonl", "sha256": sha256_file(good),
                                       "bytes": good.stat().st_size}]
    assert pools["good"]["role"] == "positive" and pools["web"]["role"] == "negative_candidates"
    assert pools["good"]["languages"] == {"de": 30, "en": 60, "sw": 4}
    assert c["proxy"] == {"kind": "heuristic", "name": "signals", "signals": c["proxy"]["signals"]}
    assert c["negative_band"]["percentiles"] == [50.0, 75.0] and c["negative_band"]["by"] == "language"
    # per language: candidates n, band floor(0.75 n) - floor(0.5 n)
    assert {g: (v["candidates"], v["selected"]) for g, v in c["negative_band"]["groups"].items()} == \
        {"de": (40, 10), "en": (80, 20), "sw": (8, 2)}
    assert c["counts"]["documents"] == {"de": {"hq": 30, "lq": 10}, "en": {"hq": 60, "lq": 20},
                                        "sw": {"hq": 4, "lq": 2}}
    before, after = c["counts"]["before_upsampling"], c["counts"]["after_upsampling"]
    assert after["en"] == before["en"] and after["de"] == before["de"]
    assert all(after["sw"][k] > before["sw"][k] for k in before["sw"])
    assert c["upsampling"]["max_upsample"] == 3 and c["upsampling"]["factors"]["en"] == 1.0
    hp = c["hyperparameters"]
    assert hp["thread"] == 1 and hp["seed"] == 3 and hp["dim"] == 8 and hp["bucket"] == 5000
    m = c["held_out"]["metrics"]
    assert set(m["per_language"]) == {"de", "en", "sw"}
    assert m["overall"]["documents"] == sum(sum(v.values()) for v in c["counts"]["held_out"].values())
    for r in [m["overall"], *m["per_language"].values()]:
        assert set(r) == {"documents", "positives", "precision", "recall", "auc"}
    # the training file is the one the card names
    assert c["training_file"]["sha256"] == sha256_file(tmp_path / "m" / "tq.train.txt")
    # labels in the file: exactly the two of the card
    labels = {line.split(" ", 1)[0] for line in (tmp_path / "m" / "tq.train.txt").read_text().splitlines()}
    assert labels == {"__label__hq", "__label__lq"}


@pytest.mark.slow
def test_toxicity_from_labelled_jsonl(toxicity_spec, tmp_path):
    t = train_classifier(toxicity_spec, tmp_path / "m")
    c = t.card
    assert t.model.suffix == ".ftz" and c["task"] == "toxicity" and c["labels"] == ["clean", "toxic"]
    pool = c["pools"][0]
    assert pool["excluded"] == {"label_not_in_toxic_clean": 1}   # "spam" is no label of the spec
    assert pool["documents"] == 160
    # German clean rows carry no language: LID named them (all German)
    assert c["counts"]["documents"]["de"] == {"clean": 40, "toxic": 40}
    assert c["held_out"]["metrics"]["per_language"]["en"]["auc"] is not None
    scorer = FastTextScorer(t.model, "toxic")
    tox, clean = scorer.score(["you are a stupid worthless idiot", "thanks for the helpful article"])
    assert tox > 0.5 > clean


def test_cli_trains_and_prints_summary(toxicity_spec, tmp_path, capsys):
    assert main(["classifier", "train", str(toxicity_spec), "--out", str(tmp_path / "cli")]) == 0
    out = capsys.readouterr().out
    assert "tt: task toxicity" in out and "held-out en:" in out and "card:" in out
    assert (tmp_path / "cli" / "tt.card.json").is_file()


def test_spec_errors_name_the_line_and_key(tmp_path):
    spec = tmp_path / "bad.yaml"
    spec.write_text("name: x\ntask: quality\nlabelled: [{name: a, paths: [a.jsonl]}]\nmax_upsampel: 2\n")
    with pytest.raises(RecipeError, match=r"bad.yaml:4 max_upsampel: unknown key"):
        load_spec(spec)
    spec.write_text("name: x\ntask: quality\nnegatives: {pools: [{name: a, paths: [a]}], proxy: {heuristic: signals}, "
                    "band: [80, 20]}\n")
    with pytest.raises(RecipeError, match="band must satisfy"):
        load_spec(spec)


def test_labels_missing_from_training_data_are_an_error(tmp_path):
    (tmp_path / "a.jsonl").write_text(json.dumps({"text": "hello there", "label": "toxic", "language": "en"}) + "\n")
    spec = tmp_path / "s.yaml"
    spec.write_text("name: x\ntask: toxicity\nlabelled: [{name: a, paths: [a.jsonl], language_field: language}]\n")
    with pytest.raises(Exception, match=r"no training documents with label\(s\) \['clean'\]"):
        train_classifier(spec, tmp_path / "o")


@pytest.mark.slow
def test_training_file_lines_hold_no_label_tokens_from_text(tmp_path):
    rows = [{"text": f"__label__evil word{i} {'good kind helpful' if i % 2 else 'bad rude nasty'} text number {i}",
             "label": i % 2, "language": "en"} for i in range(80)]
    (tmp_path / "a.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    spec = tmp_path / "s.yaml"
    spec.write_text("name: x\ntask: toxicity\nlabelled: [{name: a, paths: [a.jsonl], language_field: language}]\n"
                    "fasttext: {dim: 8, epoch: 5, bucket: 1000}\nheld_out: 0.2\n")
    t = train_classifier(spec, tmp_path / "o")
    assert t.card["labels"] == ["clean", "toxic"]
    assert "__label__evil" not in (tmp_path / "o" / "x.train.txt").read_text()
    assert hashlib.sha256(t.model.read_bytes()).hexdigest() == t.card["model"]["sha256"]


def _with_dutch_positives_only(toxicity_spec, allow: str = "") -> None:
    """The held-out case in miniature: Dutch comments all labelled toxic (230 of them), none clean."""
    pool = toxicity_spec.parent / "tox.jsonl"
    with pool.open("a", encoding="utf-8") as f:
        for i in range(230):
            f.write(json.dumps({"text": f"jij bent een domme idioot nummer {i}", "label": "toxic",
                                "language": "nl"}) + "\n")
    if allow:
        toxicity_spec.write_text(toxicity_spec.read_text() + allow)


def test_a_language_with_one_label_only_is_refused_before_training(toxicity_spec, tmp_path):
    from curation.errors import CurateError
    _with_dutch_positives_only(toxicity_spec)
    with pytest.raises(CurateError) as e:
        train_classifier(toxicity_spec, tmp_path / "o")
    msg = str(e.value)
    assert "['nl']" in msg and "nl: 230 toxic, 0 clean" in msg and "allow_one_sided" in msg
    assert not (tmp_path / "o").exists()   # refused before anything was written


@pytest.mark.slow
def test_allow_one_sided_trains_the_language_and_the_card_does_not_cover_it(toxicity_spec, tmp_path, capsys):
    _with_dutch_positives_only(toxicity_spec, "coverage: {allow_one_sided: [nl]}\n")
    t = train_classifier(toxicity_spec, tmp_path / "o")
    block = t.card["languages"]
    assert block["covered"] == ["de", "en"] and block["one_sided_allowed"] == ["nl"]
    nl = block["per_language"]["nl"]
    assert nl["covered"] is False and nl["train_negatives"] == 0
    assert nl["train_positives"] == t.card["counts"]["train_before_weights"]["nl"]["toxic"]
    assert nl["held_out"] == t.card["held_out"]["metrics"]["per_language"]["nl"]
    assert t.card["spec"]["content"]["coverage"] == {"min_documents": 20, "allow_one_sided": ["nl"]}
    assert main(["classifier", "train", str(toxicity_spec), "--out", str(tmp_path / "cli")]) == 0
    out = capsys.readouterr().out
    assert "covers: ['de', 'en']" in out and "one-sided, allowed by the spec: ['nl']" in out


@pytest.mark.slow
def test_min_documents_decides_which_languages_the_card_covers(toxicity_spec, tmp_path):
    # en and de: 30 training documents of each label (40 less the held-out quarter)
    covered = train_classifier(toxicity_spec, tmp_path / "a").card["languages"]
    assert covered["covered"] == ["de", "en"] and covered["min_documents"] == 20
    toxicity_spec.write_text(toxicity_spec.read_text() + "coverage: {min_documents: 31}\n")
    block = train_classifier(toxicity_spec, tmp_path / "b").card["languages"]
    assert block["covered"] == [] and block["min_documents"] == 31
    assert {lang: (v["train_positives"], v["train_negatives"]) for lang, v in block["per_language"].items()} == \
        {"de": (30, 30), "en": (30, 30)}
