"""The OLMo-core hand-off (`curation.mixture.olmo_core`) behind the writer seam (`curation.shards.formats`,
`curation.mixture.handoffs`): the file format itself (no OLMo-core needed), the recipe's `trainers:`, and
OLMo-core's own `NumpyFSLDatasetConfig` + data loader drawing every planned token of every stage once."""
from __future__ import annotations

import json
import shutil
import typing
from functools import partial
from pathlib import Path

import numpy as np
import pytest

from curation.mixture.handoffs import FORMATS, check, leaves, relocate_handoff, write_stage
from curation.mixture.megatron import blend_of
from curation.mixture.olmo_core import OlmoCore, part_sizes, tokenizer
from curation.mixture.sequences import stage_sequences
from curation.shards.formats import StageInput, smallest_uint
from tests.mixture.test_megatron_handoff import VOCAB, _source

try:
    import olmo_core  # noqa: F401
    OLMO = None
except ImportError as e:          # CI without the `olmo` extra: the format tests still run
    OLMO = f"olmo-core is not installed ({e}); `pip install -e '.[olmo]'` to build its dataset from the hand-off"
needs_olmo = pytest.mark.skipif(OLMO is not None, reason=OLMO or "")

DOCS = [[1, 2, 0], [3, 4, 5, 6, 0], [7, 0]]


def _stage(out: Path, sources: list[dict], seq: int, packing=None, names=("megatron", "olmo_core")):
    mdir = out / "manifests"
    st = StageInput(out, mdir, "s", seq, sources, packing, VOCAB, out, "fp", "packed",
                    partial(stage_sequences, mdir, sources, "fp", seq, packing=packing))
    sections = write_stage(list(names), st)
    m = {"stage": "s", "seq_length": seq, "vocabulary": VOCAB, "sources": sources, "stage_fingerprint": "fp",
         "long_context": None, "samples": sections["megatron"]["train_samples"],
         "blend": blend_of(sections["megatron"]), **sections}
    if packing is not None:
        np.save(mdir / "plans" / "s" / "packing.npy", packing)
        m["long_context"] = {"packing": {"path": "plans/s/packing.npy"}}
    return m


def test_an_ordinary_stage_is_its_sequences_back_to_back_with_a_label_mask_off_the_padding(tmp_path):
    out = tmp_path / "out"
    a = _source(out, "a", DOCS, [2, 0, 1])
    b = _source(out, "b", [[11, 12, 13, 0]], [1])
    m = _stage(out, [a, b], 5)
    sec = m["olmo_core"]
    hdir = out / "handoff" / "olmo_core" / "s"
    assert (sec["dir"], sec["instances"], sec["dtype"], len(sec["parts"])) == ("handoff/olmo_core/s", 3, "uint8", 1)
    assert sec["tokenizer"] == {"vocab_size": 128, "eos_token_id": 0, "pad_token_id": 127, "bos_token_id": None}
    ids = np.fromfile(hdir / "part-000.npy", dtype=np.uint8)
    packed = np.fromfile(out / "megatron" / "s" / "packed.bin", dtype=np.int32)
    assert ids.size == 15 and ids.tolist() == packed[:-1].tolist()      # Megatron's stream, without its label token
    assert ids[12:].tolist() == [127] * 3                                # the last sequence's padding
    mask = np.fromfile(hdir / "part-000.mask.npy", dtype=np.bool_)
    assert mask.tolist() == [True] * 12 + [False] * 3
    assert sec["draws"] == [{"name": "a", "planned_tokens": 8, "drawn_tokens": 8},
                            {"name": "b", "planned_tokens": 4, "drawn_tokens": 4}]
    config = json.loads((hdir / "dataset.json").read_text())
    assert config["_CLASS_"] == "olmo_core.data.numpy_dataset.NumpyFSLDatasetConfig"
    assert config["paths"] == [f"{out}/handoff/olmo_core/s/part-000.npy"]
    assert config["label_mask_paths"] == [f"{out}/handoff/olmo_core/s/part-000.mask.npy"]
    assert (config["dtype"], config["sequence_length"], config["generate_doc_lengths"]) == ("uint8", 5, True)
    assert {"handoff/olmo_core/s/dataset.json", "handoff/olmo_core/s/part-000.npy"} <= \
        {leaf.split(":")[0].removeprefix("../") for leaf in leaves(m)}
    problems, ok = check(m, out / "manifests", True)
    assert problems == [] and ok[1] == "olmo_core hand-off: 1 part(s), 3 instances of 5 (uint8); draws 12 of 12 " \
                                       "planned tokens"


def test_verify_names_a_changed_part_an_edited_config_and_a_moved_folder(tmp_path):
    out = tmp_path / "out"
    m = _stage(out, [_source(out, "a", DOCS, [2, 0, 1])], 4)
    hdir, base = out / "handoff" / "olmo_core" / "s", out / "manifests"
    part = hdir / "part-000.npy"
    data = bytearray(part.read_bytes())
    data[0] ^= 1
    part.write_bytes(bytes(data))
    assert any(f"{part} does not hold the tokens" in p for p in OlmoCore().check(m, base, True))
    data[0] ^= 1
    part.write_bytes(bytes(data))                                        # restored
    assert OlmoCore().check(m, base, True) == []
    config = hdir / "dataset.json"
    config.write_text(config.read_text().replace('"sequence_length": 4', '"sequence_length": 8'))
    assert any("dataset.json differs from the stage's hand-off" in p for p in OlmoCore().check(m, base, True))
    config.write_text(config.read_text().replace('"sequence_length": 8', '"sequence_length": 4')
                      .replace(f"{out}/", "/elsewhere/out/"))
    assert any("names the files of /elsewhere/out" in p for p in OlmoCore().check(m, base, True))
    assert OlmoCore().check(m, base, False) == []                       # a trainer reading the manifest only
    m["olmo_core"]["draws"][0]["drawn_tokens"] += 1
    assert any("olmo_core.draws" in p for p in OlmoCore().check(m, base, False))
    del m["olmo_core"]["parts"]
    m["olmo_core"]["instances"] = "3"
    assert check(m, base, False)[0][-2:] == ["manifest field `olmo_core.instances` is not int",
                                            "manifest field `olmo_core.parts` is missing"]
    assert not any("handoff/olmo_core" in leaf for leaf in leaves(m))
    m["olmo_core"]["parts"] = [{"instances": 3}]
    m["olmo_core"]["instances"] = 3
    assert any("section is malformed (KeyError" in p for p in check(m, base, False)[0])


def test_a_long_context_stage_is_its_bins_each_padded_and_masked(tmp_path):
    out = tmp_path / "out"
    a = _source(out, "a", [[1, 2, 0], [3, 4, 5, 6, 0], [7, 0], [8, 9, 10, 0]], [1, 1, 0, 1])
    packing = np.asarray([[0, 1, 0], [0, 3, 1], [0, 0, 1]], dtype=np.int64)
    m = _stage(out, [a], 8, packing)
    hdir = out / "handoff" / "olmo_core" / "s"
    ids = np.fromfile(hdir / "part-000.npy", dtype=np.uint8).reshape(-1, 8)
    assert ids.tolist() == [[3, 4, 5, 6, 0, 127, 127, 127], [8, 9, 10, 0, 1, 2, 0, 127]]
    assert np.fromfile(hdir / "part-000.mask.npy", dtype=np.bool_).reshape(-1, 8).sum(axis=1).tolist() == [5, 7]
    assert m["olmo_core"]["draws"] == [{"name": "a", "planned_tokens": 12, "drawn_tokens": 12}]
    assert OlmoCore().check(m, out / "manifests", True) == []


def test_a_large_stage_is_split_into_parts_of_whole_sequences(tmp_path, monkeypatch):
    from curation.mixture import olmo_core

    assert part_sizes(13, 4, max_tokens=20) == [5, 4, 4] and part_sizes(0, 4) == []
    assert sum(part_sizes(10**6, 4096)) == 10**6 and max(part_sizes(10**6, 4096)) * 4096 <= olmo_core.MAX_PART_TOKENS
    monkeypatch.setattr(olmo_core, "MAX_PART_TOKENS", 8)                 # two sequences of 4 per file
    out = tmp_path / "out"
    m = _stage(out, [_source(out, "a", DOCS, [2, 0, 1]), _source(out, "b", [[11, 12, 13, 0]], [1])], 4)
    sec = m["olmo_core"]
    assert [p["instances"] for p in sec["parts"]] == [2, 1] and sec["instances"] == 3
    assert [Path(p["tokens"]["path"]).name for p in sec["parts"]] == ["part-000.npy", "part-001.npy"]
    assert check(m, out / "manifests", True)[0] == []


def test_the_dtype_follows_the_vocabulary_size_and_megatron_alone_writes_no_other_folder(tmp_path):
    assert [smallest_uint(n).name for n in (256, 257, 65536, 266752, 2**32 + 1)] == \
        ["uint8", "uint16", "uint16", "uint32", "uint64"]
    assert tokenizer({"size": 266440, "padded_size": 266752, "eod": 0})["vocab_size"] == 266752
    assert tokenizer({"size": 256, "padded_size": 256, "eod": 0})["pad_token_id"] == 256   # no padding row
    out = tmp_path / "out"
    a = _source(out, "a", DOCS, [2, 0, 1])
    _stage(out, [a], 4)
    assert (out / "handoff" / "olmo_core" / "s").is_dir()
    m = _stage(out, [a], 4, names=("megatron",))                         # the format dropped from the recipe
    assert "olmo_core" not in m and not (out / "handoff").exists()


def test_the_recipe_names_registered_formats_megatron_always_and_keeps_its_fingerprint_by_default(tmp_path):
    from curation.recipe.load import RecipeError, load_recipe
    from curation.recipe.stages import Trainer
    from tests.conftest import english_doc, make_recipe, write_jsonl

    assert list(typing.get_args(Trainer)) == list(FORMATS)              # one name, one registered format
    files = [write_jsonl(tmp_path / "0.jsonl", [{"id": "0", "text": english_doc(0)}])]
    plain = load_recipe(make_recipe(tmp_path, {"web": files}))
    assert plain.recipe.trainers == ["megatron"] and plain.recipe.stages[0].trainers is None
    text = Path(make_recipe(tmp_path, {"web": files})).read_text()
    both = tmp_path / "both.yaml"
    both.write_text("trainers: [megatron, olmo_core]\n" + text)
    assert load_recipe(both).fingerprint != plain.fingerprint
    for bad, said in (("[olmo_core]", "must include megatron"), ("[megatron, megatron]", "names a format twice"),
                      ("[megatron, mosaic]", "trainers")):
        wrong = tmp_path / "wrong.yaml"
        wrong.write_text(f"trainers: {bad}\n" + text)
        with pytest.raises(RecipeError, match=said):
            load_recipe(wrong)


@needs_olmo
def test_olmo_core_builds_its_dataset_from_the_hand_off_and_draws_every_planned_token_once(tmp_path):
    """OLMo-core's own NumpyFSLDatasetConfig (from dataset.json) and data loader, on an ordinary and a
    long-context stage: every planned token drawn once, padding masked, nothing else drawn."""
    from tests.olmo_draws import olmo_draws

    for name, packing, seq in (("ordinary", None, 5),
                               ("long", np.asarray([[0, 1, 0], [1, 0, 1], [0, 0, 1]], dtype=np.int64), 8)):
        out = tmp_path / name
        a = _source(out, "a", DOCS, [2, 0, 1] if packing is None else [1, 1, 0])
        b = _source(out, "b", [[11, 12, 13, 0]], [1])
        m = _stage(out, [a, b], seq, packing)
        manifest = out / "manifests" / "s.json"
        manifest.write_text(json.dumps(m))
        got = olmo_draws(manifest, tmp_path / f"work-{name}")
        assert got["drawn"] == got["planned"] and all(n > 0 for n in got["drawn"].values()), got
        assert got["drawn_instances"] == got["instances"] and got["pad"] == got["masked"], got
        assert got["pad"] == got["instances"] * seq - sum(got["planned"].values())


@needs_olmo
@pytest.mark.slow
def test_olmo_core_draws_each_text_demo_stage_as_planned(text_run, tmp_path):
    """Every stage of recipes/text.yaml, handed off to OLMo-core as well (`trainers: [megatron, olmo_core]` on a
    copy of the run): OLMo-core's dataset and loader draw each planned token once, no source at 0, and the
    drawn tokens are the manifest's `olmo_core.draws` and Megatron's (the same sequences)."""
    from curation.mixture.manifests import handoff_mode
    from tests.olmo_draws import olmo_draws

    out = tmp_path / "run"
    shutil.copytree(text_run.out, out, symlinks=True)
    r = text_run.plan.recipe.recipe
    for stage in r.stages:
        manifest = out / "manifests" / f"{stage.name}.json"
        m = json.loads(manifest.read_text())
        packing = np.load(out / "manifests" / m["long_context"]["packing"]["path"]) if m["long_context"] else None
        mdir = out / "manifests"
        st = StageInput(out, mdir, stage.name, m["seq_length"], m["sources"], packing, m["vocabulary"], out,
                        m["stage_fingerprint"], handoff_mode(r, stage),
                        partial(stage_sequences, mdir, m["sources"], m["stage_fingerprint"], m["seq_length"],
                                packing=packing))
        sections = write_stage(["megatron", "olmo_core"], st)
        assert sections["megatron"] == m["megatron"]                    # the seam writes Megatron's bytes unchanged
        m["olmo_core"] = sections["olmo_core"]
        manifest.write_text(json.dumps(m))
        assert check(m, mdir, True)[0] == []
        got = olmo_draws(manifest, tmp_path / f"work-{stage.name}")
        assert got["drawn"] == got["planned"] and all(n > 0 for n in got["drawn"].values()), (stage.name, got)
        assert got["drawn_instances"] == got["instances"] == m["samples"], (stage.name, got)
        assert {d["name"]: d["drawn_tokens"] for d in m["olmo_core"]["draws"]} == got["drawn"]
        assert {d["name"]: d["drawn_tokens"] for d in m["megatron"]["draws"]} == got["drawn"]
    # copied elsewhere, the configs name the old folder until relocated, then OLMo-core reads the copy
    moved = tmp_path / "moved"
    shutil.copytree(out, moved, symlinks=True)
    manifest = moved / "manifests" / "stage1.json"
    m = json.loads(manifest.read_text())
    assert any("names the files of" in p for p in check(m, manifest.parent, True)[0])
    relocate_handoff(manifest)
    assert check(m, manifest.parent, True)[0] == []
    shutil.rmtree(out / "handoff")                                      # the copy reads its own files only
    got = olmo_draws(manifest, tmp_path / "work-moved")
    assert got["drawn"] == got["planned"]


@pytest.mark.slow
def test_a_recipe_naming_olmo_core_writes_it_per_stage_verifies_it_and_drops_it_again(tmp_path):
    """`curate run` with `trainers: [megatron, olmo_core]` (one stage overriding it with Megatron alone): the
    manifest lists the section only where it is written, `verify` checks it, and a re-run without it removes
    the files and writes the manifests a recipe that never named it writes."""
    from curation.commands.run import run
    from curation.mixture.verify import verify_manifest
    from tests.conftest import VOCAB as DEMO_VOCAB
    from tests.conftest import write_jsonl

    docs = write_jsonl(tmp_path / "docs.jsonl", [{"id": f"d{i}", "text": f"Document {i} about rivers, hills and "
                                                  f"the weather in spring, number {i}. " * 12} for i in range(12)])
    body = f"""name: tiny
vocabulary: {DEMO_VOCAB}
stages: [{{name: a, seq_length: 256}}, {{name: b, seq_length: 128, trainers: [megatron]}}]
sources:
  - {{name: web, license: MIT, input: {{paths: [{docs}], id_field: id}}}}
"""
    (tmp_path / "olmo.yaml").write_text("trainers: [megatron, olmo_core]\n" + body)
    (tmp_path / "plain.yaml").write_text(body)
    res = run(tmp_path / "olmo.yaml", tmp_path / "out", progress=False)
    a, b = (json.loads(p.read_text()) for p in res.manifests)
    assert "olmo_core" in a and "olmo_core" not in b
    assert sorted(p.name for p in (tmp_path / "out" / "handoff" / "olmo_core").iterdir()) == ["a"]
    assert any(line.startswith("olmo_core hand-off: 1 part(s)") for line in verify_manifest(res.manifests[0]))
    assert [d["drawn_tokens"] for d in a["olmo_core"]["draws"]] == [d["planned_tokens"] for d in a["olmo_core"]["draws"]]
    if OLMO is None:
        from tests.olmo_draws import olmo_draws
        got = olmo_draws(res.manifests[0], tmp_path / "work")
        assert got["drawn"] == got["planned"]
    again = run(tmp_path / "plain.yaml", tmp_path / "out", progress=False)
    assert not (tmp_path / "out" / "handoff").exists()
    assert all("olmo_core" not in json.loads(p.read_text()) for p in again.manifests)
    fresh = run(tmp_path / "plain.yaml", tmp_path / "fresh", progress=False)
    assert [p.read_bytes() for p in again.manifests] == [p.read_bytes() for p in fresh.manifests]
