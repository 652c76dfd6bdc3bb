"""fsspec URLs as input paths: listed by glob, identified without being read by the planner, and
streamed by the task that reads them (here: an in-memory filesystem, read by the local executor)."""
from __future__ import annotations

import gzip
import json

import fsspec
import pytest

from curation.commands.run import run
from curation.errors import RecipeError
from curation.plan.graph import load_plan
from tests.conftest import VOCAB, english_doc


@pytest.fixture
def memfs():
    fs = fsspec.filesystem("memory")
    rows = [{"id": f"d{i}", "text": english_doc(i)} for i in range(6)]
    fs.pipe("/bucket/web/part-0.jsonl.gz", gzip.compress("".join(json.dumps(r) + "\n" for r in rows[:3]).encode(), mtime=0))
    fs.pipe("/bucket/web/part-1.jsonl", "".join(json.dumps(r) + "\n" for r in rows[3:]).encode())
    fs.pipe("/bucket/web/notes.txt", b"not an input")
    yield fs
    fs.rm("/bucket", recursive=True)


def _recipe(tmp_path, pattern: str):
    path = tmp_path / "r.yaml"
    path.write_text(f"""name: t
vocabulary: {VOCAB}
dedup: {{exact: {{scope: global}}}}
sources:
  - name: web
    license: CC0-1.0
    input: {{paths: ["{pattern}"], id_field: id}}
""")
    return path


def test_a_url_glob_lists_remote_files_without_reading_them(memfs, tmp_path):
    plan = load_plan(_recipe(tmp_path, "memory://bucket/web/part-*"))
    files = plan.recipe.inputs["web"]
    assert [f.path for f in files] == ["memory:///bucket/web/part-0.jsonl.gz", "memory:///bucket/web/part-1.jsonl"]
    assert all(f.sha256.startswith("fsspec:") and f.size > 0 for f in files)
    with pytest.raises(RecipeError, match="matched no files"):
        load_plan(_recipe(tmp_path, "memory://bucket/none/*.jsonl"))
    with pytest.raises(RecipeError, match="fsspec implementation"):
        load_plan(_recipe(tmp_path, "nosuchproto://bucket/x.jsonl"))


@pytest.mark.slow
def test_remote_inputs_are_read_in_place_and_give_the_bytes_of_local_copies(memfs, tmp_path):
    remote = run(_recipe(tmp_path, "memory://bucket/web/part-*"), tmp_path / "remote", progress=False)
    local_dir = tmp_path / "copy"
    local_dir.mkdir()
    for name in ("part-0.jsonl.gz", "part-1.jsonl"):
        (local_dir / name).write_bytes(memfs.cat(f"/bucket/web/{name}"))
    local = run(_recipe(tmp_path, str(local_dir / "part-*")), tmp_path / "local", progress=False)
    assert remote.rows["tokens"][0]["documents"] == local.rows["tokens"][0]["documents"] == 6
    for ext in ("bin", "idx"):
        assert (tmp_path / "remote" / "tokenized" / "web" / f"web.{ext}").read_bytes() == \
            (tmp_path / "local" / "tokenized" / "web" / f"web.{ext}").read_bytes()
    # editing a remote file changes its identity, so the shard is processed again
    memfs.pipe("/bucket/web/part-1.jsonl", json.dumps({"id": "new", "text": english_doc(99)}).encode() + b"\n")
    again = run(_recipe(tmp_path, "memory://bucket/web/part-*"), tmp_path / "remote", progress=False)
    assert again.rows["tokens"][0]["documents"] == 4 and again.executed > 0
