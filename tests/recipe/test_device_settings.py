"""`images.device` / `audio.device` and `precision`: validated with the key path, and an unset device
leaves the recipe's fingerprint as it was (the CPU float32 encoder every earlier version ran)."""
from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from curation.errors import RecipeError
from curation.recipe import load_recipe
from tests.conftest import REPO

RECIPES = REPO / "recipes"


def _write(tmp: Path, recipe: dict) -> Path:
    folder = tmp / f"r{len(list(tmp.glob('r*')))}"
    folder.mkdir()
    for d in ("images", "audio"):
        (folder / d).symlink_to(RECIPES / d)
    path = folder / "recipe.yaml"
    path.write_text(yaml.safe_dump(recipe, sort_keys=False))
    return path


def _images() -> dict:
    data = yaml.safe_load((RECIPES / "images.yaml").read_text())
    for key in ("vocabulary", "image_tokenizer"):
        data[key] = str((RECIPES / data[key]).resolve())
    return {k: v for k, v in data.items() if not k.startswith("x-")}


def test_bad_device_and_precision_name_the_key_and_the_choices(tmp_path):
    r = _images()
    r["sources"][0].setdefault("images", {})["device"] = "gpu"
    with pytest.raises(RecipeError, match=r"sources\[0\]\.images\.device.*'cpu', 'cuda' or 'auto'"):
        load_recipe(_write(tmp_path, r))
    r["sources"][0]["images"] = {**r["sources"][0]["images"], "device": "cpu", "precision": "bfloat16"}
    with pytest.raises(RecipeError, match=r"precision 'bfloat16' applies on CUDA.*set `device: cuda` or `auto`"):
        load_recipe(_write(tmp_path, r))


def test_an_unset_device_keeps_the_recipe_fingerprint_and_a_set_one_changes_it(tmp_path):
    base = load_recipe(_write(tmp_path, _images())).fingerprint
    r = _images()
    r["sources"][0].setdefault("images", {})["device"] = "auto"
    auto = load_recipe(_write(tmp_path, r))
    assert auto.fingerprint != base
    assert auto.recipe.sources[0].settings_for("images").codec_device() == "auto"
    assert auto.recipe.sources[0].settings_for("images").codec_precision() == "tf32"   # the contract on CUDA
