"""The command line as a user meets it: exit codes and messages."""
import json

import pytest

from curation.commands.cli import main
from tests.conftest import DEMO, english_doc, make_recipe, write_jsonl


def test_help_lists_the_commands(capsys):
    with pytest.raises(SystemExit) as e:
        main(["--help"])
    assert e.value.code == 0
    text = capsys.readouterr().out
    for cmd in ("run", "validate", "explain", "verify", "ledger", "report", "codec", "tokenizer"):
        assert cmd in text


def test_validate_and_explain(capsys):
    assert main(["validate", str(DEMO)]) == 0
    assert "3 source(s), 8 input file(s)" in capsys.readouterr().out
    assert main(["explain", str(DEMO)]) == 0
    text = capsys.readouterr().out
    assert "read → licence → robots_optout → normalize → length → language" in text and "merge" in text
    assert text.count("    process  ") == 8 and text.count("    tokenize ") == 8


def test_bad_recipe_exits_2_with_the_line(tmp_path, capsys):
    write_jsonl(tmp_path / "a.jsonl", [{"id": "1", "text": english_doc(1)}])
    recipe = make_recipe(tmp_path, {"a": [tmp_path / "a.jsonl"]}, filters="[{type: length, min_words: -3}]")
    assert main(["validate", str(recipe)]) == 2
    err = capsys.readouterr().err
    assert f"curate: error: {recipe}:7 sources[0].filters[0].min_words: must be >= 0, got -3" in err


def test_verify_of_missing_manifest_exits_2(tmp_path, capsys):
    assert main(["verify", str(tmp_path / "nope.json")]) == 2
    assert "manifest not found" in capsys.readouterr().err


@pytest.mark.slow
def test_ledger_verify_and_report_commands(demo_run, capsys):
    out = demo_run.out
    assert main(["verify", str(out / "manifests" / "stage1.json")]) == 0
    assert "verified" in capsys.readouterr().out
    assert main(["ledger", str(out), "--sql", "SELECT source, total_tokens FROM tokens ORDER BY source"]) == 0
    text = capsys.readouterr().out
    assert "web_de" in text and "total_tokens" in text
    assert main(["ledger", str(out), "--table", "nope"]) == 2
    assert main(["ledger", str(out), "--table", "drops"]) == 0
    assert "gopher" in capsys.readouterr().out
    before = (out / "reports" / "report.md").read_text()
    assert main(["report", str(out)]) == 0
    assert (out / "reports" / "report.md").read_text() == before


def test_tokenizer_train_is_reproducible(tmp_path, capsys):
    write_jsonl(tmp_path / "c.jsonl", [{"text": english_doc(i, 200)} for i in range(30)])
    a, b = tmp_path / "a.json", tmp_path / "b.json"
    assert main(["tokenizer", "train", str(tmp_path / "c.jsonl"), "--out", str(a), "--vocab-size", "400"]) == 0
    assert main(["tokenizer", "train", str(tmp_path), "--out", str(b), "--vocab-size", "400"]) == 0
    assert a.read_bytes() == b.read_bytes()
    vocab = json.loads(a.read_text())["model"]["vocab"]
    assert vocab["<|endoftext|>"] == 0 and vocab["<|pad|>"] == 1 and len(vocab) <= 400
