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


def test_batch_codes_keep_finished_batches_for_one_fingerprint_only(tmp_path):
    from curation.steps.encode import BatchCodes
    codes = BatchCodes(tmp_path / "part.codes", "fp1")
    codes.save(0, ["a", "b"], [np.arange(3), np.arange(2)])
    (tmp_path / "part.codes" / "000001.npz.tmp.npz").write_bytes(b"half a batch")  # in flight when killed
    again = BatchCodes(tmp_path / "part.codes", "fp1")
    assert again.saved() == 1 and [c.tolist() for c in again.load(0, ["a", "b"])] == [[0, 1, 2], [0, 1]]
    assert again.load(0, ["a", "c"]) is None and again.load(1, ["x"]) is None   # other ids, unsaved batch
    assert BatchCodes(tmp_path / "part.codes", "fp2").saved() == 0   # another task's codes: start over
    codes.clear()
    assert not (tmp_path / "part.codes").exists()


@pytest.mark.slow
def test_killed_image_worker_resumes_from_its_last_batch_and_writes_the_same_shards(tmp_path):
    from curation.commands.run import run
    recipe = _recipe(tmp_path)
    run(recipe, tmp_path / "a", progress=False)
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
    [codes] = (b / "tokenized" / "captioned" / "parts").glob("*.codes")
    assert len(list(codes.glob("*.npz"))) == 2             # two batches saved before the kill
    total = tokenize_shard(recipe, b, "captioned", CODEC)
    [expected] = [json.loads(p.read_text())
                  for p in (tmp_path / "a" / "work" / "markers" / "tokenize" / "captioned").glob("*.json")]
    batches = expected["stats"][-1]["notes"]["batches"]
    assert batches >= 4 and total == batches - 2           # only the unwritten batches were encoded
    run(recipe, b, progress=False)              # merge and ledger
    for part in (tmp_path / "a" / "tokenized" / "captioned").rglob("*.*"):
        assert part.read_bytes() == (b / part.relative_to(tmp_path / "a")).read_bytes(), part.name
