"""The documented Python API: README's example runs as it stands, a dict recipe is the same recipe as its
YAML file, and a `Ledger` answers from the output folder or from its `ledger.duckdb` alone."""
from __future__ import annotations

import contextlib
import io
import re
import shutil

import pytest

import curation
from curation.errors import CurateError, UsageError
from tests.conftest import REPO

pytestmark = pytest.mark.slow     # runs recipes


def _example() -> str:
    text = (REPO / "README.md").read_text()
    block = re.search(r"<!-- api-example -->\n```python\n(.*?)```", text, re.S)
    assert block, "README.md has no <!-- api-example --> python block"
    return block.group(1)


@pytest.fixture()
def checkout(tmp_path, monkeypatch):
    """The example's working directory: a copy of the repository's recipes/ and tokenizers/."""
    for name in ("recipes", "tokenizers"):
        shutil.copytree(REPO / name, tmp_path / name)
    monkeypatch.chdir(tmp_path)
    return tmp_path


def test_the_readme_api_example_runs(checkout):
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        exec(compile(_example(), "README.md:api-example", "exec"), {})
    lines = printed.getvalue().splitlines()
    assert re.fullmatch(r"[0-9a-f]{12} \[.*'c4_en'.*\]", lines[0])
    assert "out/api-example/manifests/pretrain.json" in lines[1]
    assert re.fullmatch(r"\[\{'source': 'c4_en', 'records_read': \d+, 'documents_kept': \d+\}\]", lines[2])
    assert "'step': 'length'" in lines[3] and "'reason': 'too_few_words'" in lines[3]
    assert (checkout / "out" / "api-example" / "manifests" / "pretrain.json").is_file()
    assert len(list((checkout / "recipes").glob(".curate-recipe-*.yaml"))) == 1


def test_a_dict_recipe_is_its_yaml_file(checkout):
    import yaml
    recipe = {"name": "d", "vocabulary": "../tokenizers/curate-demo-v1.yaml",
              "sources": [{"name": "c4_en", "license": "ODC-BY-1.0",
                           "input": {"paths": ["demo/corpus/c4_en/*.jsonl.gz"], "id_field": "id"}}]}
    (checkout / "recipes" / "d.yaml").write_text(yaml.safe_dump(recipe, sort_keys=False))
    from_dict = curation.load_recipe(recipe, base_dir="recipes")
    from_file = curation.load_recipe("recipes/d.yaml")
    assert from_dict.fingerprint == from_file.fingerprint and from_dict.inputs == from_file.inputs
    assert curation.load_recipe(recipe, base_dir="recipes").path == from_dict.path     # the same file again
    with pytest.raises(UsageError, match=r"a path to its YAML file or a dict"):
        curation.load_recipe(["not", "a", "recipe"])
    with pytest.raises(CurateError, match=r"no ledger.duckdb"):
        curation.Ledger(checkout)


def test_a_ledger_file_alone_answers(checkout, tmp_path):
    recipe = {"name": "l", "vocabulary": "../tokenizers/curate-demo-v1.yaml",
              "sources": [{"name": "c4_en", "license": "ODC-BY-1.0",
                           "input": {"paths": ["demo/corpus/c4_en/*.jsonl.gz"], "id_field": "id"},
                           "filters": [{"type": "length", "min_words": 200}]}]}
    res = curation.run(recipe, checkout / "out", base_dir="recipes")
    dropped = [d["records"] for d in res.rows["drops"]]
    alone = tmp_path / "mailed.duckdb"
    shutil.copy(checkout / "out" / "ledger" / "ledger.duckdb", alone)
    shutil.rmtree(checkout / "out")
    ledger = curation.Ledger(alone)
    assert sum(r["records"] for r in ledger.table("drops")) == sum(dropped)
    assert len(ledger.query("SELECT * FROM decisions")) == sum(dropped)
    some = ledger.query("SELECT id FROM decisions LIMIT 1")[0]["id"]
    assert ledger.why(some, source="c4_en")[0]["reason"] == "too_few_words"
    assert ledger.why("no-such-id") == []
    assert "decisions" in ledger.tables() and ledger.tables()["funnel"].startswith("per source")
