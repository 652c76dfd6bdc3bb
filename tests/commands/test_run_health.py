"""A run that keeps nothing, or quarantines most of a source, fails loudly: a named error, the ledger
and report written for inspection, and no manifest a trainer could pick up."""
from __future__ import annotations

import pytest

from curation.commands.cli import main
from curation.commands.run import run
from curation.errors import RunFailed
from tests.conftest import english_doc, make_recipe, write_jsonl


def _recipe(tmp_path, rows, extra_source: str = ""):
    path = write_jsonl(tmp_path / "in.jsonl", rows)
    recipe = make_recipe(tmp_path, {"s": [path]}, filters="[{type: length, min_words: 20}]")
    if extra_source:
        recipe.write_text(recipe.read_text().replace("    filters:", f"    {extra_source}\n    filters:"))
    return recipe


@pytest.mark.slow
def test_a_source_that_keeps_nothing_fails_the_run(tmp_path):
    recipe = _recipe(tmp_path, [{"id": str(i), "text": "too short"} for i in range(5)])
    with pytest.raises(RunFailed, match=r"source 's' keeps no document .*too_few_words \(5\).*allow_empty"):
        run(recipe, tmp_path / "out", progress=False)
    assert (tmp_path / "out" / "ledger" / "ledger.duckdb").is_file()
    assert (tmp_path / "out" / "reports" / "index.html").is_file()
    assert not list((tmp_path / "out" / "manifests").glob("*.json"))
    assert main(["run", str(recipe), "--out", str(tmp_path / "cli"), "--quiet"]) != 0


@pytest.mark.slow
def test_allow_empty_accepts_an_empty_source(tmp_path):
    recipe = _recipe(tmp_path, [{"id": str(i), "text": "too short"} for i in range(5)], "allow_empty: true")
    res = run(recipe, tmp_path / "out", progress=False)
    assert res.rows["tokens"][0]["documents"] == 0


@pytest.mark.slow
def test_mostly_quarantined_input_fails_the_run_with_its_reasons(tmp_path):
    rows = [{"id": "0", "text": english_doc(0)}] + ["{not json"] * 3
    with pytest.raises(RunFailed, match=r"3 of 4 input units quarantined \(75%.*malformed_json \(3\).*max_quarantine_share"):
        run(_recipe(tmp_path, rows), tmp_path / "out", progress=False)
    res = run(_recipe(tmp_path, rows, "max_quarantine_share: 0.8"), tmp_path / "out2", progress=False)
    assert res.rows["tokens"][0]["documents"] == 1


@pytest.mark.slow
def test_the_decisions_dataset_names_every_dropped_record(tmp_path):
    from curation.ledger import query
    rows = [{"id": "short", "text": "too short"}, {"id": "ok", "text": english_doc(1)}, "{not json"]
    res = run(_recipe(tmp_path, rows, "max_quarantine_share: 0.9"), tmp_path / "out", progress=False)
    cols, got = query(tmp_path / "out" / "ledger", "SELECT source, id, step, outcome, reason FROM decisions ORDER BY id")
    assert got == [("s", "in.jsonl:3", "read", "quarantined", "malformed_json"), ("s", "short", "length", "dropped", "too_few_words")]
    dropped = sum(d["records"] for d in res.rows["drops"]) + sum(q["records"] for q in res.rows["quarantine"])
    assert dropped == len(got)   # one decision per dropped or quarantined record
