"""The modality registry of the recipe layer (`curation.recipe.registry`): what it loads, and the registrations
it refuses. The plug-in path end to end is `tests/steps/test_modality_plugin.py`."""
from __future__ import annotations

import ast
import subprocess
import sys

import pytest

from curation.recipe import registry
from tests.conftest import REPO


def test_the_built_in_modalities_in_registration_order():
    assert list(registry.registered()) == ["text", "image", "audio", "interleaved"]
    assert registry.formats() == ["audio", "html", "jsonl", "parquet", "warc", "webdataset"]
    from curation.steps.registry import MODALITIES
    assert list(MODALITIES) == list(registry.registered())
    assert all(MODALITIES[name].name == name for name in MODALITIES)


def test_the_built_in_settings_are_declared_by_their_modalities_and_borrowed_where_read():
    """`reasoning:`, `synthetic_tasks:`, `images:`, `audio:` and `interleaved:` are no `Source` fields: their
    modalities declare them, the modalities
    that read another's say so, and a key on a source of any other modality is refused (it was ignored while
    they were fields). A model's errors keep their place in the source, as a field's did."""
    from pydantic import ValidationError

    from curation.recipe.schema import Source
    from curation.steps.image.declaration import Images, image_settings
    table = registry.registered()
    assert {k: m.name for k, m in registry.settings_keys().items()} == \
        {"reasoning": "text", "synthetic_tasks": "text", "images": "image", "audio": "audio",
         "interleaved": "interleaved"}
    assert (table["interleaved"].borrows, table["text"].borrows) == (("images",), ("images", "audio"))
    assert not set(registry.settings_keys()) & set(Source.model_fields)
    image = {"name": "pics", "license": "CC0-1.0", "modality": "image",
             "input": {"format": "webdataset", "paths": ["x.tar"]}}
    src = Source.model_validate(image | {"images": {"area": 4096}})
    assert isinstance(image_settings(src), Images) and image_settings(src).area == 4096 and src.gives("images")
    assert not Source.model_validate(image).gives("images") and image_settings(Source.model_validate(image)) == Images()
    assert Source.model_validate(image | {"images": None}) == Source.model_validate(image)  # an older spec's null
    dumped = src.model_dump(mode="json")
    assert dumped["images"]["area"] == 4096 and "modality_settings" not in dumped and "audio" not in dumped
    assert Source.model_validate(dumped) == src
    with pytest.raises(ValidationError, match="`audio:` settings apply to `modality: text` or `modality: audio`"):
        Source.model_validate(image | {"audio": {"min_seconds": 1}})
    for key in ("reasoning", "synthetic_tasks"):   # text's own: refused elsewhere, as the fields' rules did
        with pytest.raises(ValidationError, match=f"`{key}:` settings apply to `modality: text`"):
            Source.model_validate(image | {key: {}})
    with pytest.raises(ValidationError) as e:
        Source.model_validate(image | {"images": {"arae": 1, "min_side": 0}})
    assert sorted(err["loc"] for err in e.value.errors()) == [("modality_settings", "images", "arae"),
                                                              ("modality_settings", "images", "min_side")]
    with pytest.raises(ValidationError) as e:   # the source's other errors come with them
        Source.model_validate(image | {"images": {"area": 1}, "optout": "never"})
    assert sorted(err["loc"] for err in e.value.errors()) == [("modality_settings", "images", "area"), ("optout",)]


def test_a_declaration_imports_only_the_layers_below_steps():
    """So validating a recipe loads no step code: a declaration module imports core, recipe (and pydantic)."""
    for target in registry.BUILTIN:
        path = REPO / (target.partition(":")[0].replace(".", "/") + ".py")
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom | ast.Import):
                names = [node.module or ""] if isinstance(node, ast.ImportFrom) else [a.name for a in node.names]
                for name in names:
                    assert not name.startswith("curation.") or name.split(".")[1] in ("core", "recipe"), \
                        f"{path.relative_to(REPO)} imports {name}"


def test_loading_the_registry_reads_only_the_declarations():
    code = ("import sys; import curation.recipe.registry as r; r.registered(); "
            "print(sorted(m for m in sys.modules if m.startswith('curation.steps.')))")
    loaded = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=REPO)
    assert all(m.endswith(".declaration") or m.count(".") == 2 for m in eval(loaded.stdout)), loaded.stdout


@pytest.fixture
def extra(monkeypatch):
    """Registrations added to the entry points' for one test."""
    found: list = []
    real = registry._declarations
    monkeypatch.setattr(registry, "_declarations", lambda: real() + [(f"entry point {i}", d)
                                                                     for i, d in enumerate(found)])
    registry.reload()
    yield found
    monkeypatch.undo()
    registry.reload()


def test_registrations_that_are_refused(extra):
    text = registry.registered()["text"]
    for decl, message in [(text, "'text' is registered twice"),
                          (object(), "names a object, not a curation.recipe.registry.SourceModality"),
                          (registry.SourceModality("Video", ("jsonl",), "x:y"), "is not lower-case"),
                          (registry.SourceModality("video", ("jsonl",), "x:y", borrows=("image",)),
                           r"entry point 0: 'video' borrows the settings key\(s\) \['image'\], which no registered")]:
        extra[:] = [decl]
        registry.reload()
        with pytest.raises((ValueError, TypeError), match=message):
            registry.registered()


def test_a_settings_key_may_not_shadow_a_source_field(extra):
    from pydantic import BaseModel

    from curation.recipe.schema import Source

    class Settings(BaseModel):
        pass

    extra[:] = [registry.SourceModality("toy", ("jsonl",), "x:y", settings={"weight": Settings})]
    registry.reload()
    with pytest.raises(ValueError, match=r"settings key\(s\) \['weight'\] of modality 'toy' are source fields"):
        Source.model_validate({"name": "s", "input": {"paths": ["x"]}})


def test_a_broken_plugin_is_named(tmp_path, monkeypatch):
    info = tmp_path / "broken_modality-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: broken-modality\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text("[curate.modalities]\nbroken = no_such_module_here:DECLARATION\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    registry.reload()
    try:
        with pytest.raises(ImportError, match=r"entry point broken = no_such_module_here:DECLARATION "
                                              r"\(curate.modalities, from the package broken-modality\): cannot load"):
            registry.registered()
    finally:
        monkeypatch.undo()
        registry.reload()


def test_texts_own_settings_read_through_their_accessors():
    """`reasoning:` gives a source its `.no_reasoning` copy and `synthetic_tasks:` turns its documents into tasks;
    not given, neither exists (None, not the defaults), and the two do not go together."""
    from pydantic import ValidationError

    from curation.mixture.variants import shard_variant
    from curation.recipe.schema import Source, Stage
    from curation.steps.text.declaration import Reasoning, SyntheticTasks, reasoning_settings, synthetic_tasks
    from curation.steps.text.modality import TEXT
    text = {"name": "sft", "license": "MIT", "input": {"paths": ["x.jsonl"]}}
    plain, sft = Source.model_validate(text), Source.model_validate(text | {"reasoning": {"start": "<t>"}})
    assert (reasoning_settings(plain), synthetic_tasks(plain)) == (None, None)
    assert reasoning_settings(sft) == Reasoning(start="<t>") and sft.model_dump(mode="json")["reasoning"]["start"] == "<t>"
    assert (TEXT.outputs(plain), TEXT.outputs(sft)) == (("",), ("", ".no_reasoning"))
    strip = Stage(name="s", seq_length=1024, reasoning="strip")
    assert (shard_variant(strip, plain), shard_variant(strip, sft)) == ("", ".no_reasoning")
    tasks = Source.model_validate(text | {"synthetic_tasks": {"seed": 3}})
    assert synthetic_tasks(tasks) == SyntheticTasks(seed=3)
    with pytest.raises(ValidationError, match="`synthetic_tasks` applies to text sources of plain documents"):
        Source.model_validate(text | {"synthetic_tasks": {}, "reasoning": {}})
