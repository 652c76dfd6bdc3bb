import textwrap
from pathlib import Path

import pytest

from curation.errors import RecipeError
from curation.recipe import load_recipe
from tests.conftest import TEXT_DEMO, VOCAB, english_doc, write_jsonl


def _recipe(tmp_path: Path, body: str) -> Path:
    write_jsonl(tmp_path / "a.jsonl", [{"id": "1", "text": english_doc(1)}])
    p = tmp_path / "x.yaml"
    p.write_text(textwrap.dedent(body).replace("VOCAB", str(VOCAB)))
    return p


def test_error_names_file_line_and_key_path(tmp_path):
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
          - name: c
            license: MIT
            input: {paths: [a.jsonl]}
            filters:
              - type: length
                min_words: -3
        """)
    with pytest.raises(RecipeError) as e:
        load_recipe(p)
    assert str(e.value) == f"{p}:15 sources[2].filters[0].min_words: must be >= 0, got -3"


@pytest.mark.parametrize("snippet, expected", [
    ("  - {type: lenght, min_words: 3}", "unknown step type 'lenght'"),
    ("  - {type: length, min_wrods: 3}", "sources[0].filters[0].min_wrods: unknown key"),
    ("  - {type: language, languages: []}", "sources[0].filters[0].languages"),
    ("  - {type: length, min_words: 9, max_words: 2}", "min_words (9) must be <= max_words (2)"),
    ("  - {min_words: 3}", "each filter needs a `type:` key"),
])
def test_filter_errors(tmp_path, snippet, expected):
    p = _recipe(tmp_path, f"""\
        name: x
        vocabulary: VOCAB
        sources:
          - name: a
            license: MIT
            input: {{paths: [a.jsonl]}}
            filters:
            {snippet}
        """)
    with pytest.raises(RecipeError, match=None) as e:
        load_recipe(p)
    assert expected in str(e.value)
    assert f"{p}:8" in str(e.value)


def test_unknown_top_level_key_and_duplicate_sources(tmp_path):
    p = _recipe(tmp_path, """\
        name: x
        vocabulary: VOCAB
        sourcs: []
        sources:
          - {name: a, license: MIT, input: {paths: [a.jsonl]}}
          - {name: a, license: MIT, input: {paths: [a.jsonl]}}
        """)
    with pytest.raises(RecipeError) as e:
        load_recipe(p)
    msg = str(e.value)
    assert f"{p}:3 sourcs: unknown key" in msg
    assert "source name 'a' appears twice" in msg


def test_glob_that_matches_nothing_is_an_error_with_its_line(tmp_path):
    p = _recipe(tmp_path, """\
        name: x
        vocabulary: VOCAB
        sources:
          - name: a
            license: MIT
            input:
              paths: [a.jsonl, missing/*.jsonl]
        """)
    with pytest.raises(RecipeError, match=r"x.yaml:7 sources\[0\].input.paths\[1\]: 'missing/\*.jsonl' matched no"):
        load_recipe(p)


def test_yaml_is_loaded_safely(tmp_path):
    p = _recipe(tmp_path, """\
        name: !!python/object/apply:os.system ["echo pwned"]
        vocabulary: VOCAB
        sources: []
        """)
    with pytest.raises(RecipeError, match="invalid YAML"):
        load_recipe(p)


def test_not_a_mapping_and_invalid_yaml(tmp_path):
    p = tmp_path / "r.yaml"
    p.write_text("- a\n- b\n")
    with pytest.raises(RecipeError, match="must be a YAML mapping"):
        load_recipe(p)
    p.write_text("name: [unclosed\n")
    with pytest.raises(RecipeError, match=r"r.yaml:2: invalid YAML"):
        load_recipe(p)


def test_fingerprint_covers_content_of_inputs_and_settings(tmp_path):
    p = _recipe(tmp_path, """\
        name: x
        vocabulary: VOCAB
        x-anchors: {note: ignored}
        sources:
          - {name: a, license: MIT, input: {paths: [a.jsonl]}}
        """)
    fp1 = load_recipe(p).fingerprint
    assert load_recipe(p).fingerprint == fp1
    write_jsonl(tmp_path / "a.jsonl", [{"id": "1", "text": english_doc(2)}])
    fp2 = load_recipe(p).fingerprint
    assert fp2 != fp1
    p.write_text(p.read_text().replace("name: x", "name: y"))
    assert load_recipe(p).fingerprint not in (fp1, fp2)


def test_demo_recipe_validates():
    loaded = load_recipe(TEXT_DEMO)
    assert [s.name for s in loaded.recipe.sources] == ["web_en", "c4_en", "web_de"]
    assert sum(len(v) for v in loaded.inputs.values()) == 8


def test_inputs_are_hashed_several_at_a_time_in_order_and_an_unreadable_one_is_named(tmp_path, monkeypatch):
    """Every local input's sha256 (the plan's one pass over the corpus) runs on a thread pool: the identities
    are those of hashing one file after another, in the inputs' order, and the first unreadable input in that
    order is the one the error names."""
    import curation.recipe.load as load
    from curation.core.hashing import sha256_file
    from tests.outdirs import tiny_recipe
    recipe = tiny_recipe(tmp_path, sources=("a", "b", "c"))
    got = load_recipe(recipe)
    files = [f for name in ("a", "b", "c") for f in got.inputs[name]]
    assert len(files) == 4 and all(f.sha256 == sha256_file(Path(f.path)) for f in files)
    real = load.identity

    def fails_on_b_and_c(location):
        if Path(location).name in ("b0.jsonl", "c0.jsonl"):
            raise PermissionError(13, "Permission denied")
        return real(location)
    monkeypatch.setattr(load, "identity", fails_on_b_and_c)
    with pytest.raises(RecipeError, match=r"b0\.jsonl: input of source 'b' cannot be read \(Permission denied\)"):
        load_recipe(recipe)
