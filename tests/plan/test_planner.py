"""The planner: the phase table applied to a recipe, dependencies that only point backwards, step
chains that are what the tasks build, and runs that recompute only what a change reaches."""
from __future__ import annotations

import json
import shutil

import pytest

from curation.commands.run import run
from curation.plan.explain import chains, explain
from curation.plan.graph import load_plan
from curation.plan.pipeline import build_steps, process_chain
from curation.recipe.schema import Source
from tests.conftest import REPO, TEXT_DEMO, english_doc, make_recipe, write_jsonl


def test_the_demo_runs_the_phase_table_in_order():
    plan = load_plan(TEXT_DEMO)
    assert [s.name for s in plan.stages] == ["process", "exact_keys", "exact_part", "exact_scatter", "exact_round",
                                             "exact_round", "exact_settle", "exact_resolve", "exact", "signatures", "band",
                                             "cc_scatter", "cc_round", "cc_round", "cc_settle",
                                             "cc_resolve", "clusters", "decont_index", "decont", "decont_resolve", "select_scores",
                                             "select_resolve", "tokenize", "merge"]
    assert [p.name for p, _ in plan.phases] == ["exact", "minhash", "decont", "select"]
    # 8 shards: exact dedup has keys per shard and one partition (one per 16 shards, at most 1024): a hash
    # range, a scatter, 2 rounds and a resolve task, then the settle and the assembly; MinHash clustering has one
    # partition too: 14 band tasks, a scatter, 2 rounds, the settle, one resolve and the clusters task
    assert len(plan.nodes()) == 81 and len({n.key for n in plan.nodes()}) == 81


def test_every_dependency_is_a_node_of_an_earlier_stage():
    for recipe in (TEXT_DEMO, REPO / "recipes" / "images.yaml", REPO / "recipes" / "audio.yaml"):
        seen = set()
        for stage in load_plan(recipe).stages:
            for node in stage.nodes:
                assert set(node.deps) <= seen, (recipe.name, node.key, set(node.deps) - seen)
            seen |= {n.key for n in stage.nodes}


def test_image_and_audio_sources_read_only_their_own_dedup_phases():
    images = load_plan(REPO / "recipes" / "images.yaml")
    assert [p.name for p, _ in images.phases] == ["exact", "image_near"]
    [t] = [n for n in images.tokenize if n.source == "uncaptioned"]
    assert t.spec["drops"] == [["exact_dedup", ["exact", "image_near"]]] or \
        t.spec["drops"] == [("exact_dedup", ["exact", "image_near"])]
    audio = load_plan(REPO / "recipes" / "audio.yaml")
    assert [p.name for p, _ in audio.phases] == ["exact", "audio_near"]
    assert [n.shard for n in audio.nodes() if n.phase == "exact"] == ["audio"]   # hashes compared per modality


def test_explain_shows_the_chains_the_tasks_build():
    plan = load_plan(TEXT_DEMO)
    text = explain(plan)
    for src in plan.recipe.recipe.sources:
        process, tokenize = chains(plan, src.name)
        node = next(n for n in plan.process if n.source == src.name)
        built = build_steps(process_chain(Source.model_validate(node.spec["source"]), node.spec["compliance"],
                                          plan.recipe.inputs[src.name][0].path, plan.recipe.base_dir),
                            source=src.name)
        assert process == ["read", *[s.name for s in built]]
        assert f"  process:  {' → '.join(process)}" in text
        assert tokenize == ["exact_dedup", "near_dedup", "decontaminate", "select", "tokenize"]
    assert "phase table, in run order:" in text and "minhash" in text


def _two_sources(tmp_path, extra_docs: int):
    a = write_jsonl(tmp_path / "a.jsonl", [{"id": f"a{i}", "text": english_doc(i)} for i in range(12)])
    sources = {"a": [a]}
    if extra_docs:
        sources["b"] = [write_jsonl(tmp_path / "b.jsonl", [{"id": f"b{i}", "text": english_doc(100 + i)}
                                                           for i in range(extra_docs)])]
    path = make_recipe(tmp_path, sources, extra="dedup: {exact: {scope: global}, minhash: {}}")
    # b's pages are near copies of a's, which MinHash removes: an empty source, expected here
    path.write_text(path.read_text().replace("  - name: b\n", "  - name: b\n    allow_empty: true\n"))
    return path


@pytest.mark.slow
def test_adding_a_source_re_tokenizes_no_shard_whose_drop_lists_did_not_change(tmp_path):
    """Adding a source changes the dedup phases' fingerprints, so every tokenize fingerprint moves; a
    shard whose own slice of each drop list is unchanged is still not re-tokenized (its digest holds)."""
    out = tmp_path / "out"
    first = run(_two_sources(tmp_path, 0), out, progress=False)
    marker = out / "work" / "markers" / "tokenize" / "a" / "00000.json"
    before = json.loads(marker.read_text())
    shutil.copy(out / "tokenized" / "a" / "a.bin", tmp_path / "a.bin")
    second = run(_two_sources(tmp_path, 5), out, progress=False)
    after = json.loads(marker.read_text())
    assert after["fingerprint"] != before["fingerprint"] and after["digest"] == before["digest"]
    ran = second.executed
    # process b, exact keys of b and its one partition (one per 16 shards): a hash range, a scatter, 2 rounds
    # and a resolve, then the settle and exact/text; signatures b, 14 bands, MinHash's partitioned components
    # (1 scatter, 2 rounds, settle, 1 resolve), clusters, tokenize b, merge b: never tokenize a or merge a
    assert ran == 1 + 1 + 5 + 1 + 1 + 1 + 14 + 5 + 1 + 1 + 1, ran
    assert (out / "tokenized" / "a" / "a.bin").read_bytes() == (tmp_path / "a.bin").read_bytes()
    assert first.rows["tokens"][0] == dict(second.rows["tokens"][0], run=first.rows["tokens"][0]["run"])


@pytest.mark.slow
def test_an_edited_image_sidecar_caption_reaches_the_shards(tmp_path):
    from PIL import Image

    from curation.core.vocab import Vocabulary
    from curation.shards import read_tokens
    folder = tmp_path / "pics"
    folder.mkdir()
    Image.new("RGB", (96, 64), (200, 30, 30)).save(folder / "red.png")
    (folder / "red.txt").write_text("a red square")
    recipe = tmp_path / "r.yaml"
    recipe.write_text(f"""name: t
vocabulary: {REPO}/tokenizers/curate-demo-v1.yaml
image_tokenizer: {REPO}/tokenizers/curate-demo-ibq.yaml
sources:
  - name: pics
    modality: image
    license: CC0-1.0
    acquire: {{kind: image_folder, path: {folder}}}
    input: {{format: webdataset, paths: [images-*.tar]}}
    images: {{min_side: 32, area: 4096}}
""")
    vocab = Vocabulary.load(REPO / "tokenizers" / "curate-demo-v1.yaml")
    first = run(recipe, tmp_path / "out", progress=False)
    (folder / "red.txt").write_text("a red square on a white wall")
    second = run(recipe, tmp_path / "out", progress=False)
    assert first.rows["sources"][0]["source_fingerprint"] != second.rows["sources"][0]["source_fingerprint"]
    tokens = read_tokens(tmp_path / "out" / "tokenized" / "pics" / "pics").tolist()
    caption = vocab.tokenizer.decode([t for t in tokens if t in vocab.block("text")][-12:])
    assert "white wall" in caption
