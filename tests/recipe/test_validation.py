"""What `curate validate` refuses before any work: duplicate keys, alias bombs, numbers that would run out
of memory or overflow later, plans too large to hold, sources without a licence, and licence policies
that would fail open."""
from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from curation.errors import RecipeError
from curation.recipe import load_recipe
from curation.recipe.limits import MAX_TOKENS
from tests.conftest import REPO, VOCAB, english_doc, write_jsonl


def _recipe(tmp_path: Path, body: str) -> Path:
    write_jsonl(tmp_path / "a.jsonl", [{"id": "1", "text": english_doc(1), "license": "MIT"}])
    p = tmp_path / "x.yaml"
    p.write_text(textwrap.dedent(body).replace("VOCAB", str(VOCAB)))
    return p


def _source(settings: str = "", top: str = "") -> str:
    return f"name: x\nvocabulary: VOCAB\n{top}\nsources:\n  - name: a\n    license: MIT\n" \
           f"    input: {{paths: [a.jsonl]}}\n{settings}"


def test_duplicate_key_names_both_lines(tmp_path):
    p = _recipe(tmp_path, """\
        name: x
        vocabulary: VOCAB
        sources:
          - name: a
            license: MIT
            input: {paths: [a.jsonl]}
          - name: b
            license: MIT
            input: {paths: [a.jsonl]}
            license: CC-BY-NC-4.0
        """)
    with pytest.raises(RecipeError) as e:
        load_recipe(p)
    assert str(e.value).startswith(f"{p}:8 and :10: key 'license' appears twice in sources[1]")


@pytest.mark.parametrize("body, expected", [
    (("name: x\nvocabulary: VOCAB\nsources:\n  - name: a\n    license: MIT\n    input: {paths: [a.jsonl]}\n"
      "    input: {paths: [b.jsonl]}\n"), ":6 and :7: key 'input' appears twice in sources[0]"),
    ("name: x\nname: y\nvocabulary: VOCAB\nsources: []\n", ":1 and :2: key 'name' appears twice in the recipe's top"),
    ("name: x\nvocabulary: VOCAB\nsources:\n  - {name: a, license: MIT, input: {paths: [a.jsonl], paths: [b]}}\n",
     ":4 and :4: key 'paths' appears twice in sources[0].input"),
    ("name: x\nvocabulary: VOCAB\nlicence_policy: {exclude: [], exclude: [non-commercial]}\nsources: []\n",
     "key 'exclude' appears twice in licence_policy"),
    # a mapping or a list as a key (doubled braces in a template) is named, not a TypeError
    ("name: x\nvocabulary: VOCAB\noptout: {{snapshots: robots}}\nsources: []\n", ":3 optout: a key is a mapping"),
    ("name: x\nvocabulary: VOCAB\n[a, b]: 1\nsources: []\n", ":3 top level: a key is a list"),
])
def test_duplicate_keys_anywhere(tmp_path, body, expected):
    p = _recipe(tmp_path, body)
    with pytest.raises(RecipeError, match=None) as e:
        load_recipe(p)
    assert expected in str(e.value)


def test_anchors_and_merge_keys_still_work(tmp_path):
    p = _recipe(tmp_path, """\
        name: x
        vocabulary: VOCAB
        x-filters: &filters [{type: length, min_words: 1}]
        x-source: &src {license: MIT, input: {paths: [a.jsonl]}, filters: *filters}
        sources:
          - {<<: *src, name: a}
          - <<: *src
            name: b
            license: CC0-1.0
        """)
    r = load_recipe(p).recipe
    assert [(s.name, s.license, len(s.filters)) for s in r.sources] == [("a", "MIT", 1), ("b", "CC0-1.0", 1)]


def test_alias_bomb_is_refused_without_expanding_it(tmp_path):
    """Nine levels of nine aliases: 9^9 (387 million) strings if expanded; refused from the node graph."""
    levels = ["l0: &l0 [" + ", ".join(['"lol"'] * 9) + "]"]
    levels += [f"l{i}: &l{i} [" + ", ".join([f"*l{i - 1}"] * 9) + "]" for i in range(1, 10)]
    p = _recipe(tmp_path, "\n".join(levels) + "\nname: x\nvocabulary: VOCAB\nsources: []\n")
    with pytest.raises(RecipeError, match=r"aliases expand this recipe to [\d,]+ nodes.*alias bomb"):
        load_recipe(p)


def test_recursive_alias_is_refused(tmp_path):
    p = _recipe(tmp_path, "name: x\nvocabulary: VOCAB\nx-loop: &loop [*loop]\nsources: []\n")
    with pytest.raises(RecipeError, match=r"x.yaml:3: a YAML alias refers to the node that contains it"):
        load_recipe(p)


@pytest.mark.parametrize("settings, top, expected", [
    ("", "stages: [{name: s, budget_tokens: 1000000000000000000000000000000}]", f"must be <= {MAX_TOKENS}"),
    ("", "stages: [{name: s, budget_tokens: 1.0e+30}]", "stages[0].budget_tokens"),
    ("", "dedup: {minhash: {bands: 100000000}}", "dedup.minhash.bands: must be <= 2048"),
    ("", "dedup: {minhash: {bands: 64, rows: 64}}", "bands × rows = 4096 permutations, more than 2048"),
    ("", "dedup: {minhash: {bands: 2048, rows: 1, partitions: 4096}}", "the plan would hold"),
    ("", "dedup: {minhash: {ngram: 100000}}", "dedup.minhash.ngram: must be <= 64"),
    ("", "dedup: {minhash: {seed: 99999999999}}", "dedup.minhash.seed: must be <= 4294967295"),
    ("", "tokenize_batch_size: 100000000", "tokenize_batch_size: must be <= 65536"),
    ("    weight: .inf\n", "", "sources[0].weight"),
    ("    max_epochs: .nan\n", "", "sources[0].max_epochs"),
    ("", "stages: [{name: s, budget_tokens: 10, mixture: {a: {epochs: 1.0e+9}}}]", "epochs: must be <= 1000"),
    ("", "stages: [{name: s, seq_length: 100000000}]", "stages[0].seq_length: must be <= 1048576"),
    ("", "decontamination: {benchmarks: [{name: b, path: a.jsonl, fields: [text]}], ngram: 1000}",
     "decontamination.ngram: must be <= 64"),
])
def test_numeric_bounds(tmp_path, settings, top, expected):
    p = _recipe(tmp_path, _source(settings, top))
    with pytest.raises(RecipeError) as e:
        load_recipe(p)
    assert expected in str(e.value)


@pytest.mark.parametrize("settings, expected", [
    ("images: {area: 100000000000}", "images.area: must be <= 16777216"),
    ("images: {batch_tokens: 100000000000}", "images.batch_tokens: must be <="),
    ("images: {phash_reduce: 100000}", "images.phash_reduce: must be <= 512"),
])
def test_image_bounds(tmp_path, settings, expected):
    p = _recipe(tmp_path, f"""\
        name: x
        vocabulary: VOCAB
        sources:
          - name: a
            license: MIT
            modality: image
            input: {{format: webdataset, paths: [a.jsonl]}}
            {settings}
        """)
    with pytest.raises(RecipeError) as e:
        load_recipe(p, resolve_inputs=False)
    assert expected in str(e.value)


@pytest.mark.parametrize("settings, expected", [
    ("audio: {max_seconds: 1.0e+9}", "audio.max_seconds: must be <= 3600"),
    ("audio: {min_seconds: 30, max_seconds: 10}", "min_seconds (30.0) must be <= max_seconds (10.0)"),
    ("audio: {chars_per_second: [30, 4]}", "chars_per_second must be [min, max]"),
    ("acquire: {kind: audio_folder, path: x, max_bytes: 100000000000000}", "acquire.max_bytes: must be <="),
])
def test_audio_and_acquire_bounds(tmp_path, settings, expected):
    p = _recipe(tmp_path, f"""\
        name: x
        vocabulary: VOCAB
        sources:
          - name: a
            license: MIT
            modality: audio
            input: {{format: audio, paths: [clips.jsonl], id_field: id}}
            {settings}
        """)
    with pytest.raises(RecipeError) as e:
        load_recipe(p, resolve_inputs=False)
    assert expected in str(e.value)


def test_plan_size_counts_input_files(tmp_path, monkeypatch):
    from curation.plan.graph import load_plan
    from curation.plan.size import plan_nodes
    from curation.recipe import limits
    for i in range(6):
        write_jsonl(tmp_path / "in" / f"{i}.jsonl", [{"id": "1", "text": "x"}])
    p = _recipe(tmp_path, _source().replace("[a.jsonl]", "[in/*.jsonl]"))
    # exact dedup: keys per file; a partition per 16 files (at most 1024): a hash range, a scatter, 2 rounds
    # and a resolve task each; the settle and the assembly
    assert plan_nodes(load_recipe(p).recipe, {"a": 6}) == {"process": 6, "tokenize": 6, "merge": 1, "exact": 13}
    assert plan_nodes(load_recipe(p).recipe, {"a": 40})["exact"] == 40 + 3 * 5 + 2
    monkeypatch.setattr(limits, "MAX_PLAN_NODES", 12)
    with pytest.raises(RecipeError, match=r"the plan would hold 26 tasks \(exact 13, process 6, tokenize 6\)"):
        load_plan(p)


def test_source_without_licence_is_an_error_naming_it(tmp_path):
    p = _recipe(tmp_path, """\
        name: x
        vocabulary: VOCAB
        sources:
          - name: a
            license: MIT
            input: {paths: [a.jsonl]}
          - name: web
            input: {paths: [a.jsonl]}
        """)
    with pytest.raises(RecipeError) as e:
        load_recipe(p)
    msg = str(e.value)
    assert msg.startswith(f"{p}:7 sources[1]: source 'web' declares no licence; add `license:`")
    assert msg.count("declares no licence") == 1


@pytest.mark.parametrize("settings, expected", [
    ("    license: '  '\n", "sources[0].license: is blank"),
    ("    licence_field: license\n", "licence_field 'license' is never read: add 'license' to input.metadata_fields"),
])
def test_licence_settings(tmp_path, settings, expected):
    p = _recipe(tmp_path, _source().replace("    license: MIT\n", "") + settings if "license:" in settings
                else _source(settings))
    with pytest.raises(RecipeError) as e:
        load_recipe(p)
    assert expected in str(e.value)


def test_licence_policy_fails_closed(tmp_path):
    default = load_recipe(_recipe(tmp_path, _source())).recipe.licence_policy
    assert {"unknown", "all-rights-reserved", "share-alike"} <= set(default.exclude)
    narrowed = load_recipe(_recipe(tmp_path, _source(top="licence_policy: {exclude: [non-commercial]}")))
    assert narrowed.recipe.licence_policy.excluded() == ["all-rights-reserved", "non-commercial", "unknown"]
    admitted = load_recipe(_recipe(tmp_path, _source(top="licence_policy: {exclude: [], admit_unknown: true}")))
    assert admitted.recipe.licence_policy.excluded() == ["all-rights-reserved"]
    with pytest.raises(RecipeError, match="admit_unknown is true but exclude lists unknown"):
        load_recipe(_recipe(tmp_path, _source(top="licence_policy: {exclude: [unknown], admit_unknown: true}")))
    nested = _source("    licence_field: meta.license\n").replace("{paths: [a.jsonl]}",
                                                                   "{paths: [a.jsonl], metadata_fields: [meta]}")
    assert load_recipe(_recipe(tmp_path, nested)).recipe.sources[0].licence_field == "meta.license"


@pytest.mark.parametrize("name", ["demo", "acquisition", "audio", "images", "interleaved"])
def test_shipped_recipes_validate(name):
    loaded = load_recipe(REPO / "recipes" / f"{name}.yaml", resolve_inputs=False)
    assert all(s.license for s in loaded.recipe.sources)


@pytest.mark.parametrize("recipe", ["demo", "text", "images", "audio", "interleaved"])
def test_plan_node_estimate_matches_the_plan(recipe):
    """Each phase's `node_count` is what its `plan` builds, stage by stage of the plan."""
    from curation.plan.graph import load_plan
    from curation.plan.size import plan_nodes
    p = load_plan(REPO / "recipes" / f"{recipe}.yaml")
    counted = plan_nodes(p.recipe.recipe, {s: len(f) for s, f in p.recipe.inputs.items()})
    built = {phase.name: len(nodes) for phase, nodes in p.phases}
    built |= {stage.name: len(stage.nodes) for stage in p.stages if stage.phase is None}
    assert counted == built


# --- issue 22.10 ------------------------------------------------------------------------------------
def test_an_input_that_climbs_out_of_the_recipe_folder_is_refused(tmp_path):
    (tmp_path / "sub").mkdir()
    p = tmp_path / "sub" / "x.yaml"
    p.write_text(f"name: x\nvocabulary: {VOCAB}\nsources:\n  - name: a\n    license: MIT\n"
                 f"    input: {{paths: [../../../../../../etc/passwd]}}\n")
    with pytest.raises(RecipeError) as e:
        load_recipe(p)
    assert f"{p}:6 sources[0].input.paths[0]" in str(e.value) and "leaves the folder of the recipe" in str(e.value)
    write_jsonl(tmp_path / "sub" / "data" / "a.jsonl", [{"id": "1", "text": english_doc(1)}])
    p.write_text(p.read_text().replace("../../../../../../etc/passwd", "data/../data/a.jsonl"))
    assert len(load_recipe(p).inputs["a"]) == 1   # `..` that stays inside is fine


def test_all_mixture_weights_zero_is_refused(tmp_path):
    p = _recipe(tmp_path, _source(top="stages:\n  - name: s\n    budget_tokens: 1000\n    seq_length: 64\n"
                                       "    mixture:\n      a: {weight: 0}\n"))
    with pytest.raises(RecipeError, match="would draw nothing"):
        load_recipe(p)


def test_an_unknown_mixture_source_is_reported_at_its_key(tmp_path):
    p = _recipe(tmp_path, _source(top="stages:\n  - name: s\n    budget_tokens: 1000\n    seq_length: 64\n"
                                       "    mixture:\n      a: {weight: 1}\n      nope: {weight: 1}\n"))
    with pytest.raises(RecipeError) as e:
        load_recipe(p)
    line = p.read_text().splitlines().index("      nope: {weight: 1}") + 1
    assert f"{p}:{line} stages[0].mixture.nope" in str(e.value) and "unknown source 'nope'" in str(e.value)


def test_a_vocabulary_that_is_a_folder_says_so(tmp_path):
    p = _recipe(tmp_path, _source().replace("VOCAB", str(VOCAB.parent)))
    with pytest.raises(RecipeError, match="is a folder, not a vocabulary file"):
        load_recipe(p)


def test_a_benchmark_fields_typo_fails_validate(tmp_path):
    import gzip
    import json as _json

    from curation.plan.graph import load_plan
    (tmp_path / "b.jsonl.gz").write_bytes(gzip.compress(_json.dumps({"question": "q", "answer": "a"}).encode()))
    p = _recipe(tmp_path, _source(top="decontamination:\n  benchmarks:\n"
                                       "    - {name: b, path: b.jsonl.gz, fields: [question, answr]}\n"))
    with pytest.raises(RecipeError, match=r"decontamination.benchmarks\[b\].fields: .*no field\(s\) \['answr'\]"):
        load_plan(p)
    p.write_text(p.read_text().replace("answr", "answer"))
    load_plan(p)
