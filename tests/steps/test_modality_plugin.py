"""A modality is one folder plus one registration line (docs/CONTRIBUTING.md, How to add a modality): a toy
`video-frames` modality (a JSONL of frame captions, tokenized as text) is written into a temporary package with
an entry point in `curate.modalities`, and a recipe using it validates, plans, processes, tokenizes and merges
with no file of `curation/` changed."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pyarrow.parquet as pq
import pytest
from pydantic import ValidationError

from curation.recipe import registry
from tests.benchmarks.compare_outputs import compare
from tests.conftest import REPO, VOCAB, write_jsonl

DECLARATION = '''
"""video-frames: clips as the captions of their frames, in order (one JSONL row per clip)."""
from pydantic import Field

from curation.recipe.base import Strict
from curation.recipe.registry import SourceModality


class Frames(Strict):
    frames_field: str = "frames"           # a list of {"t": seconds, "caption": str}
    max_frames: int = Field(default=64, ge=1, le=4096)


def _no_text_filters(src):
    if src.modality == "video-frames" and src.filters:
        raise ValueError("video-frames sources take `video_frames:` settings, not text `filters`")


DECLARATION = SourceModality(name="video-frames", formats=("jsonl",), steps="video_frames.modality:VIDEO_FRAMES",
                             settings={"video_frames": Frames}, rules=(_no_text_filters,),
                             minhash=True)   # its captions are a document MinHash may shingle
'''

MODALITY = '''
"""The steps of video-frames: read clips, drop long ones, tokenize the captions as text."""
import json
from functools import partial

import pyarrow as pa

from curation.core.hashing import content_hash
from curation.core.record import Drop, Record
from curation.core.vocab import Vocabulary
from curation.steps.base import Filter, Reader, Reject, StepSpec
from curation.steps.modality import LedgerTable, Modality
from curation.steps.text.tokenize import TextTokenizer

# its own ledger table: one row per source
TABLE = pa.schema([("run", pa.string()), ("source", pa.string()), ("clips", pa.int64()),
                   ("too_many_frames", pa.int64()), ("text_tokens", pa.int64())])


class FramesReader(Reader):
    def __init__(self, path, *, frames_field, id_field, **kw):
        super().__init__(path, **kw)
        self.frames_field, self.id_field = frames_field, id_field

    def parse(self):
        with open(self.path, encoding="utf-8") as f:
            for n, line in enumerate(f):
                row = json.loads(line)
                frames = row.get(self.frames_field)
                if not isinstance(frames, list) or not frames:
                    yield Reject(f"{self.shard_label}:{n}", "no_frames", f"line {n}: no {self.frames_field!r} list",
                                 line)
                    continue
                yield Record(id=str(row[self.id_field]), source=self.source,
                             text="\\n".join(fr["caption"] for fr in frames),
                             payload={"frame_times": [float(fr["t"]) for fr in frames]})


class MaxFrames(Filter):
    name = "max_frames"

    def __init__(self, max_frames, **kw):
        super().__init__(**kw)
        self.max_frames = max_frames

    def keep(self, record):
        n = len(record.payload["frame_times"])
        return True if n <= self.max_frames else Drop("too_many_frames", f"{n} frames")


def _settings(src):
    return {"frames_field": src.settings_for("video_frames").frames_field, "id_field": src.input.id_field}


def _encoder(src, run):
    def build(**kw):   # kw: the task's source and sink, and what a codec's encoder reads (checkpoint, out)
        return TextTokenizer(Vocabulary.cached(run["vocab"]), batch_size=run["batch_size"], source=kw["source"],
                             sink=kw["sink"])
    return StepSpec("tokenize", {"vocab": run["vocab_sha256"], "tokenizer": run["tokenizer_sha256"]}, build)


def _checks(src, path, base_dir):
    cap = src.settings_for("video_frames").max_frames
    return [StepSpec("max_frames", {"max_frames": cap}, partial(MaxFrames, cap))]


VIDEO_FRAMES = Modality(
    name="video-frames",
    extra_columns=[("frame_times", pa.list_(pa.float64()))],
    content_hash=lambda r: content_hash(r.text),
    extra_row=lambda r: {"frame_times": r.payload["frame_times"]},
    reader=lambda src, path, **kw: FramesReader(path, **_settings(src), **kw),
    reader_settings=_settings,
    checks=_checks,
    encoder=_encoder,
    outputs=lambda src: ("",),
    record_columns=("frame_times",),
    family="text",   # its tokens count as text in the modality table
    ledger_table=LedgerTable("video_frames", TABLE, lambda run, src, totals, counts: {
        "run": run, "source": src.name, "clips": totals["tokenize"].records_out,
        "too_many_frames": totals["max_frames"].dropped["too_many_frames"], "text_tokens": counts["text"]}),
)
'''


def install_toy_modality(root):
    """Write the toy modality into the folder `root` as an installed distribution would be: one folder
    (`video_frames/`) and one registration (its entry point). Returns `root`, to put on a path."""
    (root / "video_frames").mkdir(parents=True)
    (root / "video_frames" / "__init__.py").write_text(textwrap.dedent(DECLARATION))
    (root / "video_frames" / "modality.py").write_text(textwrap.dedent(MODALITY))
    info = root / "video_frames-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: video-frames\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text("[curate.modalities]\nvideo-frames = video_frames:DECLARATION\n")
    return root


@pytest.fixture
def video_frames(tmp_path, monkeypatch):
    """The toy modality installed in this process."""
    root = install_toy_modality(tmp_path / "site")
    monkeypatch.syspath_prepend(str(root))
    registry.reload()
    yield root
    monkeypatch.undo()
    for name in [m for m in sys.modules if m == "video_frames" or m.startswith("video_frames.")]:
        del sys.modules[name]
    registry.reload()


def _clips(tmp_path):
    rows = [{"id": f"c{i}", "frames": [{"t": t / 2, "caption": f"frame {t} of clip {i}: a dog runs on the beach"}
                                       for t in range(3 + i)]} for i in range(4)]
    rows.append({"id": "broken", "frames": []})
    return write_jsonl(tmp_path / "clips.jsonl", rows)


def toy_recipe(tmp_path, settings: str = "{max_frames: 5}") -> object:
    path = tmp_path / "recipe.yaml"
    path.write_text(textwrap.dedent(f"""\
        name: toy
        vocabulary: {VOCAB}
        sources:
          - name: clips
            modality: video-frames
            input: {{paths: [{json.dumps(str(_clips(tmp_path)))}], id_field: id}}
            video_frames: {settings}
            license: CC0-1.0
        """))
    return path


@pytest.mark.slow
def test_a_toy_modality_is_one_folder_and_one_registration(video_frames, tmp_path):
    """Planned here; run by `curate run` in a fresh process where the plug-in is installed (on its path), as it
    would be on a machine that has it: every table, the plug-in's own included, exists from the start. Then run
    again on embedded Ray with two workers, which must write the same bytes."""
    from curation.commands.api import Ledger
    from curation.plan.graph import load_plan
    from curation.steps.modality import read_processed

    assert "video-frames" in registry.registered() and "video-frames" not in str(registry.BUILTIN)
    recipe = toy_recipe(tmp_path)
    plan = load_plan(recipe)
    assert {n.phase for n in plan.nodes() if n.source == "clips"} >= {"process", "tokenize", "merge"}
    env = os.environ | {"PYTHONPATH": os.pathsep.join([str(video_frames), str(REPO)])}
    subprocess.run([sys.executable, "-m", "curation.commands.cli", "run", str(recipe), "--out",
                    str(tmp_path / "out"), "--executor", "local", "-q"], check=True, env=env, cwd=tmp_path)
    ledger = Ledger(tmp_path / "out")
    steps = {r["step"]: r for r in ledger.query("select * from steps where source = 'clips'")}
    assert [tuple(r.values()) for r in ledger.query("select step, reason, records from quarantine "
                                                    "where source = 'clips'")] == [("read", "no_frames", 1)]
    assert ("max_frames", "too_many_frames", 1) in [tuple(r.values()) for r in ledger.query(
        "select step, reason, records from drops where source = 'clips'")]       # clip c3 has 6 frames
    assert steps["read"]["records_in"] == 5 and steps["tokenize"]["records_out"] == 3
    tokens = ledger.query("select * from tokens where source = 'clips'")[0]
    assert tokens["documents"] == 3 and tokens["text_tokens"] == tokens["total_tokens"] > 0
    own = ledger.query("select clips, too_many_frames, text_tokens from video_frames")
    assert own == [{"clips": 3, "too_many_frames": 1, "text_tokens": tokens["text_tokens"]}]
    processed = next((tmp_path / "out" / "processed" / "clips").glob("*.parquet"))
    assert pq.read_schema(processed).names[-1] == "frame_times"
    back = list(read_processed(processed, "clips", ("frame_times",)))
    assert [r.payload["frame_times"] for r in back] == [[0.0, 0.5, 1.0], [0.0, 0.5, 1.0, 1.5],
                                                        [0.0, 0.5, 1.0, 1.5, 2.0]]
    assert any(p.name.startswith("clips") and p.suffix == ".bin" for p in (tmp_path / "out" / "tokenized").rglob("*"))
    # on embedded Ray the workers import the plug-in from the same path (PYTHONPATH reaches them): same bytes
    subprocess.run([sys.executable, "-m", "curation.commands.cli", "run", str(recipe), "--out",
                    str(tmp_path / "ray"), "--executor", "ray", "--workers", "2", "-q"], check=True, env=env,
                   cwd=tmp_path)
    assert compare(tmp_path / "out", tmp_path / "ray") == []


def test_a_plugin_modality_settings_are_checked_and_kept_in_a_dump(video_frames):
    from curation.recipe.schema import Source
    base = {"name": "clips", "license": "CC0-1.0", "modality": "video-frames", "input": {"paths": ["x.jsonl"]}}
    src = Source.model_validate(base | {"video_frames": {"max_frames": 3}})
    assert src.settings_for("video_frames").max_frames == 3
    assert Source.model_validate(base).settings_for("video_frames").max_frames == 64   # the model's default
    dumped = src.model_dump(mode="json")
    assert dumped["video_frames"] == {"frames_field": "frames", "max_frames": 3} and "modality_settings" not in dumped
    assert Source.model_validate(dumped) == src                    # a task spec validates back to the same source
    from curation.corpus.minhash import MinHashPhase
    assert MinHashPhase().covers(src)                              # what its declaration says
    for changes, message in [({"video_frames": {"max_frams": 3}}, "max_frams"),
                             ({"input": {"paths": ["x"], "format": "parquet"}}, "reads `input.format` 'jsonl'"),
                             ({"filters": [{"type": "length", "min_words": 1}]}, "not text `filters`"),
                             ({"modality": "text", "video_frames": {}}, "apply to `modality: video-frames`")]:
        with pytest.raises(ValidationError, match=message):
            Source.model_validate(base | changes)


def test_an_unknown_modality_lists_the_registered_ones():
    from curation.recipe.schema import Source
    with pytest.raises(ValidationError, match="unknown modality 'video-frames'; registered modalities: "
                                              "audio, image, interleaved, text"):
        Source.model_validate({"name": "s", "modality": "video-frames", "input": {"paths": ["x"]}})
    with pytest.raises(ValidationError, match="unknown input format 'mp4'; the registered modalities read audio, "
                                              "html, jsonl, parquet, warc, webdataset"):
        Source.model_validate({"name": "s", "input": {"paths": ["x"], "format": "mp4"}})


def test_a_cluster_node_without_the_plugin_or_with_another_build_of_it_is_named(video_frames, tmp_path):
    """`ray start` nodes run a plug-in's steps from their own installation: the node check compares the build of
    each plug-in modality the recipe uses (distribution, version, code digest), as it compares curate's."""
    from curation.recipe.load import load_recipe
    from curation.runtime import build, cluster
    from tests.conftest import TEXT_DEMO

    recipe = load_recipe(toy_recipe(tmp_path)).recipe
    assert build.plugin_modalities(recipe) == {"video-frames"}
    assert build.plugin_modalities(load_recipe(TEXT_DEMO).recipe) == set()
    driver = build.environment()
    installed = driver["plugins"]["video-frames"]
    assert installed.startswith("video-frames 0.1 (code ") and len(installed) == len("video-frames 0.1 (code )") + 16
    text = build.deciding_libraries(set())

    def problems(env, modalities=("video-frames",)):
        return cluster.problems({"env": env, "out": "ok", "inputs": []}, driver, cluster.Path("/o"), text, modalities)

    assert problems(driver) == []
    assert problems({**driver, "plugins": {}}) == [
        f"modality 'video-frames' is not installed there (the driver has the plug-in {installed}); install that "
        f"plug-in on every node"]
    assert problems({**driver, "plugins": {}}, modalities=()) == []     # a recipe that does not use it
    # the same version with one file changed: another build, named with both digests
    step_code = video_frames / "video_frames" / "modality.py"
    step_code.write_text(step_code.read_text() + "\n# patched on this node\n")
    other = build.environment()["plugins"]["video-frames"]
    assert other != installed and other.startswith("video-frames 0.1 (code ")
    assert problems({**driver, "plugins": {"video-frames": other}}) == [
        f"modality 'video-frames': the plug-in {other} there, the driver's {installed}; install the same build on "
        f"every node"]
