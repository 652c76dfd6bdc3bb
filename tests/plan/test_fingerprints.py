"""Fingerprints cover what a node reads and nothing else, proven with `curate explain --nodes` on
copies of the demo recipes: a mixture-only change recomputes nothing, a tokenize setting of one source
reaches no other source, a MinHash setting re-tokenizes only text sources."""
from __future__ import annotations

import copy
import io
from contextlib import redirect_stdout
from pathlib import Path

import pytest
import yaml

from curation.commands.cli import main
from tests.conftest import REPO

RECIPES = REPO / "recipes"


def _load(name: str) -> dict:
    data = yaml.safe_load((RECIPES / f"{name}.yaml").read_text())
    for key in ("vocabulary", "image_tokenizer", "audio_tokenizer"):
        if key in data:
            data[key] = str((RECIPES / data[key]).resolve())
    return {k: v for k, v in data.items() if not k.startswith("x-")}


def nodes(recipe: dict, tmp: Path) -> dict[str, str]:
    """node key -> fingerprint, as `curate explain --nodes` prints them for this recipe (then its resources)."""
    folder = tmp / f"r{len(list(tmp.glob('r*')))}"
    folder.mkdir()
    for d in ("demo", "images", "audio", "classifiers"):
        (folder / d).symlink_to(RECIPES / d)
    path = folder / "recipe.yaml"
    path.write_text(yaml.safe_dump(recipe, sort_keys=False))
    out = io.StringIO()
    with redirect_stdout(out):
        assert main(["explain", str(path), "--nodes"]) == 0
    return dict(line.split()[:2] for line in out.getvalue().splitlines())


def changed(a: dict, b: dict) -> set[str]:
    assert a.keys() == b.keys()
    return {k for k in a if a[k] != b[k]}


def _source(recipe: dict, name: str) -> dict:
    return next(s for s in recipe["sources"] if s["name"] == name)


def _mixed() -> dict:
    """One text source of the demo and one image source of the image demo in one recipe."""
    demo, images = _load("text"), _load("images")
    recipe = {k: demo[k] for k in ("name", "vocabulary", "dedup", "decontamination", "optout")}
    recipe |= {"image_tokenizer": images["image_tokenizer"], "image_dedup": images["image_dedup"],
               "stages": [{"name": "pretrain", "seq_length": 1024}],
               "sources": [_source(demo, "web_en"), _source(images, "captioned")]}
    return recipe


def test_mixture_only_changes_recompute_nothing(tmp_path):
    base = _load("text")
    before = nodes(base, tmp_path)
    edited = copy.deepcopy(base)
    _source(edited, "web_en").update(weight=3.0, max_epochs=3)
    _source(edited, "c4_en")["category"] = "Other web"
    stage = edited["stages"][0]
    stage["budget_tokens"] = 500000
    stage["mixture"] = {"web_en": {"weight": 2}, "c4_en": {"epochs": 1}, "web_de": {"weight": 1}}
    stage["category_targets"] = {}
    edited["stages"][1]["goldfish"] = {"k": 40, "h": 30}
    edited["ablation"]["steps"] = 10
    after = nodes(edited, tmp_path)
    assert len(before) == 81 and changed(before, after) == set()


def test_a_tokenize_setting_of_one_source_reaches_no_other_source(tmp_path):
    base = _load("images")
    before = nodes(base, tmp_path)
    edited = copy.deepcopy(base)
    _source(edited, "captioned")["images"]["batch_tokens"] = 8192
    moved = changed(before, nodes(edited, tmp_path))
    assert moved and all(k.startswith(("tokenize/captioned/", "merge/captioned")) for k in moved)
    assert "merge/captioned" in moved and not any("uncaptioned" in k for k in moved)


def test_a_minhash_setting_re_tokenizes_only_text_sources(tmp_path):
    base = _mixed()
    before = nodes(base, tmp_path)
    edited = copy.deepcopy(base)
    edited["dedup"]["minhash"] = {**edited["dedup"]["minhash"], "ngram": 4}
    moved = changed(before, nodes(edited, tmp_path))
    stages = {k.split("/")[0] for k in moved}
    # the selection ranks what near-dedup left, so it is recomputed too
    assert stages == {"signatures", "band", "cc_scatter", "cc_round", "cc_settle", "cc_resolve", "clusters",
                      "select_scores", "select_resolve", "tokenize", "merge"}
    assert {k for k in moved if k.startswith(("tokenize/", "merge/"))} == \
        {k for k in before if k.startswith(("tokenize/web_en", "merge/web_en"))}


def test_a_text_filter_moves_text_work_and_leaves_image_processing_alone(tmp_path):
    base = _mixed()
    before = nodes(base, tmp_path)
    edited = copy.deepcopy(base)
    _source(edited, "web_en")["filters"][0]["min_words"] = 60
    moved = changed(before, nodes(edited, tmp_path))
    assert {k for k in before if k.startswith("process/web_en")} <= moved
    assert "exact/text" in moved and "clusters" in moved and "decont_resolve" in moved
    # the image source's processing, exact and near-duplicate dedup read nothing of the text source
    assert not {k for k in moved if k.startswith(("process/captioned", "exact/image", "exact_keys/captioned",
                                                  "exact_part/image", "image_near", "decont/captioned"))}
    assert {k for k in moved if k.startswith(("exact_keys/web_en", "exact_part/text"))}


def test_an_output_neutral_setting_is_in_no_fingerprint(tmp_path):
    base = _load("text")
    edited = copy.deepcopy(base)
    edited["tokenize_batch_size"] = 64
    edited["description"] = "another description"
    assert changed(nodes(base, tmp_path), nodes(edited, tmp_path)) == set()


def resources(recipe: dict, tmp: Path) -> dict[str, str]:
    """node key -> resources, the third column of `curate explain --nodes`."""
    folder = tmp / f"r{len(list(tmp.glob('r*')))}"
    folder.mkdir()
    for d in ("demo", "images", "audio", "classifiers"):
        (folder / d).symlink_to(RECIPES / d)
    path = folder / "recipe.yaml"
    path.write_text(yaml.safe_dump(recipe, sort_keys=False))
    out = io.StringIO()
    with redirect_stdout(out):
        assert main(["explain", str(path), "--nodes"]) == 0
    return {k: r for k, _, r in (line.split() for line in out.getvalue().splitlines())}


@pytest.mark.slow
def test_device_cpu_is_the_default_and_a_gpu_device_moves_only_that_sources_tokenize(tmp_path):
    base = _load("images")
    before = nodes(base, tmp_path)
    explicit = copy.deepcopy(base)
    _source(explicit, "captioned")["images"]["device"] = "cpu"
    assert changed(before, nodes(explicit, tmp_path)) == set()   # cpu is what every earlier version ran
    auto = copy.deepcopy(base)
    _source(auto, "captioned")["images"]["device"] = "auto"
    moved = changed(before, nodes(auto, tmp_path))
    assert moved and all(k.startswith(("tokenize/captioned/", "merge/captioned")) for k in moved)
    # the precision contract is part of the fingerprint when the codec may run on a GPU
    bf16 = copy.deepcopy(auto)
    _source(bf16, "captioned")["images"]["precision"] = "bfloat16"
    assert {k for k in changed(nodes(auto, tmp_path), nodes(bf16, tmp_path))} == moved
    res = resources(auto, tmp_path)
    assert {r for k, r in res.items() if k.startswith("tokenize/captioned/")} == {"cpus=1,gpus=auto"}
    assert {r for k, r in res.items() if not k.startswith("tokenize/captioned/")} == {"cpus=1,gpus=0"}
    cuda = copy.deepcopy(base)
    _source(cuda, "uncaptioned")["images"] = {**(_source(cuda, "uncaptioned").get("images") or {}), "device": "cuda"}
    assert {r for k, r in resources(cuda, tmp_path).items() if k.startswith("tokenize/uncaptioned/")} == {"cpus=1,gpus=1"}
