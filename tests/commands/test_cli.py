"""The command line as a user meets it: exit codes and messages, common options, ledger export."""
import argparse
import csv
import io
import json
import logging
import re

import pyarrow.parquet as pq
import pytest

from curation.commands.cli import build_parser, main
from curation.commands.console import Session, exit_code
from curation.errors import ConservationError, CurateError, InputError, RecipeError, VerifyError
from curation.ledger.store import write_ledger
from tests.conftest import TEXT_DEMO, english_doc, make_recipe, write_jsonl
from tests.report.ledgers import soofi_like


def test_help_lists_the_commands(capsys):
    with pytest.raises(SystemExit) as e:
        main(["--help"])
    assert e.value.code == 0
    text = capsys.readouterr().out
    for cmd in ("run", "validate", "explain", "verify", "ledger", "report", "codec", "tokenizer"):
        assert cmd in text
    for code, meaning in (("2", "usage error"), ("3", "invalid recipe"), ("4", "verification failed"),
                          ("1", "the command failed"), ("130", "interrupted")):
        assert re.search(rf"^  {code} +{meaning}", text, re.M), code


def test_validate_and_explain(capsys):
    assert main(["validate", str(TEXT_DEMO)]) == 0
    assert "3 source(s), 8 input file(s)" in capsys.readouterr().out
    assert main(["explain", str(TEXT_DEMO)]) == 0
    text = capsys.readouterr().out
    assert "read → licence → robots_optout → normalize → length → language" in text and "merge" in text
    assert text.count("    process  ") == 8 and text.count("    tokenize ") == 8


def _bad_recipe(tmp_path):
    write_jsonl(tmp_path / "a.jsonl", [{"id": "1", "text": english_doc(1)}])
    return make_recipe(tmp_path, {"a": [tmp_path / "a.jsonl"]}, filters="[{type: length, min_words: -3}]")


def test_bad_recipe_exits_3_with_the_line(tmp_path, capsys):
    recipe = _bad_recipe(tmp_path)
    assert main(["validate", str(recipe)]) == 3
    err = capsys.readouterr().err
    assert f"curate: error: {recipe}:7 sources[0].filters[0].min_words: must be >= 0, got -3" in err
    assert "Traceback" not in err


def test_verify_of_missing_manifest_exits_4(tmp_path, capsys):
    assert main(["verify", str(tmp_path / "nope.json")]) == 4
    assert "manifest not found" in capsys.readouterr().err


def test_exit_codes_per_error_class(tmp_path, capsys):
    with pytest.raises(SystemExit) as e:   # argparse: unknown command, missing argument
        main(["frobnicate"])
    assert e.value.code == 2
    with pytest.raises(SystemExit) as e:
        main(["ledger", str(tmp_path), "--format", "xml"])
    assert e.value.code == 2
    assert main(["ledger", str(tmp_path), "--table", "nope"]) == 2      # parses, but names no table
    assert main(["report", str(tmp_path)]) == 1                          # no ledger there: the command failed
    assert "holds no ledger" in capsys.readouterr().err
    for error, code in ((RecipeError("r"), 3), (VerifyError("v"), 4), (InputError("i"), 1),
                        (ConservationError("c"), 1), (CurateError("x"), 1), (KeyboardInterrupt(), 130),
                        (ValueError("bug"), 70)):
        assert exit_code(error) == code


def _raise(error):
    def fn(args):
        raise error
    return fn


def test_interrupts_and_bugs_have_their_own_codes(capsys):
    assert Session().run(_raise(KeyboardInterrupt()), None, ["run", "x"]) == 130
    assert "interrupted; completed tasks are kept" in capsys.readouterr().err
    assert Session().run(_raise(ZeroDivisionError("boom")), None, ["run", "x"]) == 70
    err = capsys.readouterr().err
    assert "internal error (a bug in curate" in err and "Traceback" in err and "ZeroDivisionError: boom" in err


def _leaves(parser):
    subs = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    if not subs:
        yield parser
    for a in subs:
        for child in a.choices.values():
            yield from _leaves(child)


def test_every_command_takes_verbose_quiet_and_log():
    parser = build_parser()
    leaves = list(_leaves(parser))
    assert len(leaves) >= 11   # run, validate, explain, verify, ledger, report, train, ablate and three tools
    for p in leaves:
        opts = p._option_string_actions
        assert {"-v", "--verbose", "-q", "--quiet", "--log"} <= set(opts), p.prog
    for argv in (["-v", "validate", "r.yaml"], ["validate", "r.yaml", "-v"], ["validate", "-v", "r.yaml"]):
        a = parser.parse_args(argv)
        assert (a.verbose, a.quiet, a.log) == (1, False, None), argv
    a = parser.parse_args(["run", "r.yaml", "--quiet", "--log", "x.log"])
    assert (a.verbose, a.quiet, a.log) == (0, True, "x.log")
    with pytest.raises(SystemExit):
        parser.parse_args(["run", "r.yaml", "-q", "-v"])   # one or the other


def test_verbosity_sets_the_curation_loggers(capsys):
    for argv, level in ((["-q"], logging.ERROR), ([], logging.WARNING), (["-v"], logging.INFO),
                        (["-vv"], logging.DEBUG)):
        assert main(["validate", str(TEXT_DEMO), *argv]) == 0
        assert logging.getLogger("curation").level == level
    capsys.readouterr()
    logging.getLogger("curation.test").info("shown with -v")
    assert "INFO curation.test: shown with -v" in capsys.readouterr().err
    assert main(["validate", str(TEXT_DEMO), "-q"]) == 0
    logging.getLogger("curation.test").warning("hidden by -q")
    assert "hidden by -q" not in capsys.readouterr().err
    logging.getLogger("curation").setLevel(logging.WARNING)


def test_log_file_holds_the_output_and_the_traceback(tmp_path, capsys):
    log = tmp_path / "curate.log"
    assert main(["validate", str(TEXT_DEMO), "--log", str(log)]) == 0
    out = capsys.readouterr().out
    text = log.read_text()
    assert text.startswith("==> ") and f"curate validate {TEXT_DEMO} --log {log}" in text.splitlines()[0]
    assert out.strip() in text and text.endswith("<== exit 0\n")
    recipe = _bad_recipe(tmp_path)
    assert main(["validate", str(recipe), "--log", str(log)]) == 3
    err = capsys.readouterr().err
    run = log.read_text().split("==> ")[-1]                    # appended: the second invocation
    assert "Traceback (most recent call last)" in run and "RecipeError" in run and "min_words" in run
    assert "Traceback" not in err and run.endswith("<== exit 3\n")
    assert main(["validate", str(recipe), "-v"]) == 3           # -v: the traceback on stderr
    assert "Traceback (most recent call last)" in capsys.readouterr().err
    assert main(["validate", str(TEXT_DEMO), "--log", str(tmp_path / "no" / "such" / "dir.log")]) == 2


@pytest.fixture(scope="module")
def ledger_out(tmp_path_factory):
    out = tmp_path_factory.mktemp("ledger")
    rows = soofi_like(n_sources=4)
    write_ledger(rows, out / "ledger")
    return out, rows


@pytest.mark.slow
def test_ledger_formats_parse_back(ledger_out, tmp_path, capsys):
    out, rows = ledger_out
    want = pq.read_table(out / "ledger" / "drops.parquet").to_pylist()
    assert main(["ledger", str(out), "--table", "drops", "--format", "json"]) == 0
    assert json.loads(capsys.readouterr().out) == want
    assert main(["ledger", str(out), "--table", "drops", "--format", "csv", "--output", str(tmp_path / "d.csv")]) == 0
    back = list(csv.DictReader(io.StringIO((tmp_path / "d.csv").read_text())))
    assert [{**r, "records": int(r["records"])} for r in back] == want
    assert main(["ledger", str(out), "--table", "clusters", "--format", "csv"]) == 0   # lists as JSON text
    (row,) = list(csv.DictReader(io.StringIO(capsys.readouterr().out)))
    assert json.loads(row["members"]) == rows["clusters"][0]["members"] and row["size"] == "2"
    assert main(["ledger", str(out), "--table", "runs", "--format", "parquet", "--output",
                 str(tmp_path / "runs.parquet")]) == 0
    assert pq.read_table(tmp_path / "runs.parquet").equals(pq.read_table(out / "ledger" / "runs.parquet"))
    sql = "SELECT source, sum(records) AS removed FROM drops GROUP BY source ORDER BY source"
    assert main(["ledger", str(out), "--sql", sql, "--format", "json"]) == 0
    got = json.loads(capsys.readouterr().out)
    assert got == [{"source": s, "removed": sum(d["records"] for d in want if d["source"] == s)}
                   for s in sorted({d["source"] for d in want})]
    assert all(isinstance(r["removed"], int) for r in got)   # DuckDB's decimal sums stay integers


def test_ledger_exports_every_table_into_a_folder(ledger_out, tmp_path, capsys):
    out, _ = ledger_out
    assert main(["ledger", str(out), "--format", "json"]) == 2   # which table? a folder for all of them
    assert "--output FOLDER" in capsys.readouterr().err
    assert main(["ledger", str(out), "--format", "parquet", "--output", str(tmp_path / "all")]) == 0
    from curation.ledger import SCHEMAS
    assert sorted(p.stem for p in (tmp_path / "all").iterdir()) == sorted(SCHEMAS)
    assert pq.read_table(tmp_path / "all" / "mixture.parquet").equals(pq.read_table(out / "ledger" / "mixture.parquet"))
    with pytest.raises(SystemExit):
        main(["ledger", str(out), "--table", "drops", "--sql", "SELECT 1"])   # one or the other


@pytest.mark.slow
def test_ledger_verify_and_report_commands(text_run, capsys):
    out = text_run.out
    assert main(["verify", str(out / "manifests" / "stage1.json")]) == 0
    assert "verified" in capsys.readouterr().out
    assert main(["ledger", str(out), "--sql", "SELECT source, total_tokens FROM tokens ORDER BY source"]) == 0
    text = capsys.readouterr().out
    assert "web_de" in text and "total_tokens" in text
    assert main(["ledger", str(out), "--table", "nope"]) == 2
    assert main(["ledger", str(out), "--table", "drops"]) == 0
    assert "gopher" in capsys.readouterr().out
    assert main(["ledger", str(out), "--table", "funnel", "--format", "json"]) == 0     # a view
    assert {r["source"] for r in json.loads(capsys.readouterr().out)} == {"web_en", "c4_en", "web_de"}
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
