"""`--out` inside, equal to or above an input is refused (exit 2) before any work, naming both. On 32447ae
a second run into `site/out` read the first run's own report as a training document."""
from __future__ import annotations

import os

import pytest

from curation.commands.cli import main
from tests.conftest import make_recipe, write_jsonl
from tests.outdirs import doc


@pytest.fixture
def site(tmp_path):
    for i in range(2):
        write_jsonl(tmp_path / "site" / f"part{i}" / "pages.jsonl", [{"id": f"p{i}-{j}", "text": doc(10 * i + j)}
                                                                     for j in range(4)])
    recipe = make_recipe(tmp_path, {"web": []})
    recipe.write_text(recipe.read_text().replace('paths: []', 'paths: ["site/**/*.jsonl"]'))
    return tmp_path, recipe


@pytest.mark.parametrize("out, where", [("site/out", "inside"), ("site/part0", "inside"), ("site", "equal to"),
                                        (".", "above")])
def test_out_overlapping_an_input_glob_is_refused(site, capsys, out, where):
    tmp, recipe = site
    assert main(["run", str(recipe), "--out", str(tmp / out), "--executor", "local"]) == 2
    err = capsys.readouterr().err
    assert f"is {where} the input 'site/**/*.jsonl' of source 'web' ({tmp / 'site'})" in err
    assert str((tmp / out).resolve()) in err and "Traceback" not in err
    assert not (tmp / "site" / "out").exists() and not (tmp / "processed").exists()


def test_symlinks_are_resolved_before_comparing(site, capsys):
    tmp, recipe = site
    os.symlink(tmp / "site" / "part1", tmp / "elsewhere")
    assert main(["run", str(recipe), "--out", str(tmp / "elsewhere" / "out"), "--executor", "local"]) == 2
    assert "is inside the input 'site/**/*.jsonl'" in capsys.readouterr().err
    assert not (tmp / "site" / "part1" / "out").exists()


@pytest.mark.slow
def test_a_sibling_folder_is_fine(site):
    tmp, recipe = site
    assert main(["run", str(recipe), "--out", str(tmp / "out"), "--executor", "local", "-q"]) == 0
