"""Image tokenization checkpoints after every batch: a killed worker resumes to the same bytes."""
from __future__ import annotations

import json
import shutil
import signal

import numpy as np
import pytest

from tests.conftest import REPO
from tests.killing import killed_worker, tokenize_shard

CODEC = "curation.steps.image.codec:IBQEncoder"


def _recipe(tmp_path):
    text = (REPO / "recipes" / "images.yaml").read_text().replace("../tokenizers/", f"{REPO}/tokenizers/")
    text = text.replace("area: 16384, caption: after}", "area: 16384, caption: after, batch_tokens: 128}")
    (tmp_path / "images").symlink_to(REPO / "recipes" / "images")
    path = tmp_path / "images.yaml"
    path.write_text(text)
    return path


def test_resumable_writer_drops_a_half_written_batch_and_restarts_on_a_new_fingerprint(tmp_path):
    from curation.shards import ResumableWriter, read_tokens
    prefix = tmp_path / "part"
    w = ResumableWriter(prefix, "fp1")
    w.add_batch([np.arange(3), np.arange(2)], extra={"n": 1})
    w._bin.write(np.arange(7, dtype=np.int32).tobytes())  # a batch in flight when the task died
    w.abort()
    w = ResumableWriter(prefix, "fp1")
    assert (w.batches_done, w.lengths, w.extra) == (1, [3, 2], {"n": 1})
    w.add_batch([np.arange(4)], extra={"n": 2})
    w.close()
    assert read_tokens(prefix).tolist() == [0, 1, 2, 0, 1, 0, 1, 2, 3]
    assert not (tmp_path / "part.ckpt.json").exists()
    w = ResumableWriter(tmp_path / "other", "fp1")
    w.add_batch([np.arange(2)], extra={})
    w.abort()
    assert ResumableWriter(tmp_path / "other", "fp2").batches_done == 0  # another task's state: start over


@pytest.mark.slow
def test_killed_image_worker_resumes_from_its_last_batch_and_writes_the_same_shards(tmp_path):
    from curation.commands.run import run
    recipe = _recipe(tmp_path)
    run(recipe, tmp_path / "a", workers=1, progress=False)
    shutil.copytree(tmp_path / "a", tmp_path / "b", symlinks=True)
    b = tmp_path / "b"
    # forget the captioned shard's tokenization, as if its worker had never finished
    for marker in [*(b / "work" / "markers" / "tokenize" / "captioned").glob("*.json"),
                   b / "work" / "markers" / "merge" / "captioned.json"]:
        marker.unlink()
    for f in (b / "tokenized" / "captioned").rglob("*"):
        if f.is_file():
            f.unlink()
    assert killed_worker(recipe, b, "captioned", CODEC, 3) == -signal.SIGKILL
    [ckpt] = (b / "tokenized" / "captioned" / "parts").glob("*.ckpt.json")
    assert json.loads(ckpt.read_text())["batches"] == 2   # two batches written before the kill
    total = tokenize_shard(recipe, b, "captioned", CODEC)
    [expected] = [json.loads(p.read_text())
                  for p in (tmp_path / "a" / "work" / "markers" / "tokenize" / "captioned").glob("*.json")]
    batches = expected["stats"][-1]["notes"]["batches"]
    assert batches >= 4 and total == batches - 2           # only the unwritten batches were encoded
    run(recipe, b, workers=1, progress=False)              # merge and ledger
    for part in (tmp_path / "a" / "tokenized" / "captioned").rglob("*.*"):
        assert part.read_bytes() == (b / part.relative_to(tmp_path / "a")).read_bytes(), part.name
