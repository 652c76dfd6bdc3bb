"""An auditor's `ledger.duckdb` opens anywhere: copied alone it still answers per-document questions, the
oldest duckdb `pyproject.toml` allows opens it, and its comments explain every table and column (the
README's schema page is generated from them)."""
from __future__ import annotations

import re
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import duckdb
import pytest

from curation.commands.run import run
from curation.ledger.comments import column_comment, described
from curation.ledger.schema import SCHEMAS
from curation.ledger.schema_doc import empty_ledger, readme_section, schema_markdown
from curation.ledger.store import DECISIONS_SCHEMA, STORAGE_FORMAT
from tests.conftest import english_doc, make_recipe, write_jsonl

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def ledger(tmp_path_factory):
    """A run with a dropped and a quarantined record; returns its ledger folder."""
    tmp = tmp_path_factory.mktemp("portable")
    rows = [{"id": "short", "text": "too short"}, {"id": "ok", "text": english_doc(1)}, "{not json"]
    recipe = make_recipe(tmp, {"s": [write_jsonl(tmp / "in.jsonl", rows)]},
                         filters="[{type: length, min_words: 20}]")
    recipe.write_text(recipe.read_text().replace("    filters:", "    max_quarantine_share: 0.9\n    filters:"))
    run(recipe, tmp / "out", progress=False)
    return tmp / "out" / "ledger"


WHY = "SELECT step, outcome, reason FROM decisions WHERE source = 's' AND id = 'short'"


@pytest.mark.slow
def test_a_ledger_copied_alone_says_why_a_document_left(ledger, tmp_path):
    alone = tmp_path / "mailed" / "ledger.duckdb"
    alone.parent.mkdir()
    shutil.copy(ledger / "ledger.duckdb", alone)
    away = ledger.parent / "decisions-away"
    (ledger / "decisions").rename(away)     # nothing of the output folder is readable but the copy
    con = duckdb.connect(str(alone), read_only=True)
    try:
        assert con.execute(WHY).fetchall() == [("length", "dropped", "too_few_words")]
        assert con.execute("SELECT count(*) FROM decisions").fetchone()[0] == 2
        assert con.execute("SELECT source, records_read, documents_kept FROM funnel").fetchall() == [("s", 3, 1)]
    finally:
        con.close()
        away.rename(ledger / "decisions")


def test_every_table_and_column_has_a_comment():
    missing = [f"{t}.{c}" for t, s in {**SCHEMAS, "decisions": DECISIONS_SCHEMA}.items() for c in s.names
               if not column_comment(t, c)]
    assert missing == []
    con = duckdb.connect()
    try:
        empty_ledger(con)
        tables, columns, views = described(con)
    finally:
        con.close()
    assert {t for t, _ in tables} == {*SCHEMAS, "decisions"} and all(c for _, c in tables)
    assert all(text for cols in columns.values() for _, _, text in cols)
    assert {v for v, _ in views} == {"funnel", "drop_reasons", "category_shares"} and all(c for _, c in views)


@pytest.mark.slow
def test_the_written_ledger_carries_the_comments(ledger):
    con = duckdb.connect(str(ledger / "ledger.duckdb"), read_only=True)
    try:
        assert schema_markdown(con) == schema_markdown()
    finally:
        con.close()


def test_the_readme_schema_page_is_what_the_generator_writes():
    assert readme_section((ROOT / "README.md").read_text()) == schema_markdown(), \
        "README's ledger schema is stale: run `python -m curation.ledger.schema_doc --readme README.md`"


def _oldest_duckdb() -> str:
    pin = re.search(r'"duckdb>=([0-9.]+)', (ROOT / "pyproject.toml").read_text()).group(1)
    return {"1.1": "1.1.3"}.get(pin, pin)     # the last patch release of the oldest minor the pin allows


@pytest.mark.slow
def test_the_oldest_duckdb_the_pin_allows_opens_the_ledger(ledger, tmp_path):
    version = _oldest_duckdb()
    assert STORAGE_FORMAT == "v1.1.0" and version.startswith("1.1")
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    got = subprocess.run([str(venv / "bin" / "pip"), "install", "-q", "--no-deps", f"duckdb=={version}"],
                         capture_output=True, text=True)
    if got.returncode:
        pytest.skip(f"duckdb=={version} is not installable here (no wheel in the package index): {got.stderr[-300:]}")
    script = textwrap.dedent(f"""
        import duckdb
        assert duckdb.__version__ == {version!r}, duckdb.__version__
        con = duckdb.connect({str(ledger / 'ledger.duckdb')!r}, read_only=True)
        print(con.execute({WHY!r}).fetchall())
        print(con.execute("SELECT count(*) FROM duckdb_columns() WHERE comment IS NULL AND table_name IN "
                          "(SELECT table_name FROM duckdb_tables())").fetchone()[0])
        print(con.execute("SELECT * FROM funnel").fetchall())
    """)
    out = subprocess.run([str(venv / "bin" / "python"), "-c", script], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    con = duckdb.connect(str(ledger / "ledger.duckdb"), read_only=True)
    try:
        funnel = con.execute("SELECT * FROM funnel").fetchall()     # what this duckdb reads
    finally:
        con.close()
    # the per-document answer, no table column without its comment, a view over the stored tables
    assert out.stdout.splitlines() == ["[('length', 'dropped', 'too_few_words')]", "0", str(funnel)]
