"""`--out s3://...` writes to the bucket for real (moto's S3 server on 127.0.0.1, started by the test): the
bucket holds byte for byte what a local-path run writes, `curate verify` and `curate train` read from the
URL, and a re-run skips every task. On 32447ae the same command exited 0 after writing a local `./s3:`
folder, and nothing reached the bucket."""
from __future__ import annotations

import json
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from curation.commands.cli import main
from curation.commands.run import run
from curation.core.outloc import Remote
from curation.runtime.mirror import mirror_dir
from tests.benchmarks.compare_outputs import compare
from tests.conftest import TEXT_DEMO
from tests.outdirs import tiny_recipe
from tests.s3server import download, make_bucket, s3_server, s3fs

pytestmark = pytest.mark.slow


@pytest.fixture
def bucket(tmp_path, monkeypatch):
    monkeypatch.setenv("CURATE_STAGING", str(tmp_path / "staging"))
    monkeypatch.setenv("CURATE_CACHE", str(tmp_path / "cache"))
    monkeypatch.chdir(tmp_path)
    with s3_server():
        make_bucket("bkt")
        yield "s3://bkt"


def _no_local_scheme_folder(tmp_path):
    assert not any(p.name.endswith(":") for p in tmp_path.rglob("*")), "a local folder named after the scheme"


def test_local_executor_into_s3_matches_a_local_run(text_run, bucket, tmp_path, capsys, monkeypatch):
    url = f"{bucket}/text"
    downloads = []   # whole files a task or the driver downloads: every task runs here and finds its inputs in
    real_get = Remote.get   # the driver's mirror, so none (files read in part are still fetched in part)
    monkeypatch.setattr(Remote, "get", lambda self, rel, local: (downloads.append(rel), real_get(self, rel, local)))
    res = run(TEXT_DEMO, url, progress=False, executor="local")
    assert downloads == []
    monkeypatch.setattr(Remote, "get", real_get)
    assert res.out == url and res.manifests == [f"{url}/manifests/{p.name}" for p in text_run.manifests]
    assert compare(text_run.out, download(url, tmp_path / "bucket")) == []
    fs = s3fs()
    assert not fs.exists("bkt/text/.curate-lock")            # released
    assert json.loads(fs.cat("bkt/text/.curate-recipe.json")) == {"recipe": "text"}
    assert fs.cat("bkt/text/megatron/stage1/data_args.txt").decode().split()[-1].startswith(f"{url}/megatron/")
    for stage in ("stage1", "long-context-4k"):
        assert main(["verify", f"{url}/manifests/{stage}.json"]) == 0
    # a re-run from another machine (a fresh staging folder: nothing adopted, everything pulled): every task
    # skipped, the driver downloads only what it reads (no text, no per-shard parts) and writes the same bytes
    monkeypatch.setenv("CURATE_STAGING", str(tmp_path / "another-machine"))
    again = run(TEXT_DEMO, url, progress=False, executor="local")
    assert (again.executed, again.skipped) == (0, text_run.executed + text_run.skipped)
    assert compare(text_run.out, download(url, tmp_path / "again")) == []
    pulled = {str(p.relative_to(mirror_dir(url))) for p in mirror_dir(url).rglob("*") if p.is_file()}
    assert any(p.startswith("tokenized/") for p in pulled) and any(p.startswith("ledger/decisions/") for p in pulled)
    assert not [p for p in pulled if p.startswith(("processed/", "work/minhash/sig/", "work/exact/"))
                or "/parts/" in p]
    _no_local_scheme_folder(tmp_path)


def test_ray_executor_into_s3_matches_a_local_run(bucket, tmp_path):
    import ray
    if ray.is_initialized():   # the embedded Ray must start here, so its workers see the S3 endpoint
        ray.shutdown()
    recipe = tiny_recipe(tmp_path / "r")
    # partitioned MinHash: band and resolve tasks on the workers fetch only what they read (partial_reads)
    recipe.write_text(recipe.read_text().replace("dedup: {minhash: {}}", "dedup: {minhash: {partitions: 3}}"))
    local = run(recipe, tmp_path / "local", progress=False, executor="local")
    url = f"{bucket}/tiny"
    res = run(recipe, url, progress=False, executor="ray", workers=2)
    assert res.executed == local.executed
    assert compare(local.out, download(url, tmp_path / "bucket")) == []
    assert main(["verify", f"{url}/manifests/pretrain.json"]) == 0
    assert main(["train", f"{url}/manifests/pretrain.json", "--out", str(tmp_path / "train"), "--max-steps", "1",
                 "--seq-length", "32", "--batch-size", "1", "-q"]) == 0
    consumed = pq.read_table(s3fs().open("bkt/tiny/ledger/consumed.parquet")).to_pylist()   # written back
    assert {r["stage"] for r in consumed} == {"pretrain"}
    assert main(["verify", f"{url}/manifests/pretrain.json"]) == 0          # ledger.duckdb agrees with it
    again = run(recipe, url, progress=False, executor="ray", workers=2)
    assert again.executed == 0
    _no_local_scheme_folder(tmp_path)


def test_bucket_problems_and_a_foreign_lock_are_refused_before_any_work(bucket, tmp_path, capsys):
    recipe = tiny_recipe(tmp_path / "r")
    assert main(["run", str(recipe), "--out", "s3://nobucket/x", "--executor", "local"]) == 1
    assert "bucket 'nobucket' does not exist" in capsys.readouterr().err
    s3fs().pipe_file("bkt/held/.curate-lock", json.dumps({"host": "elsewhere.example", "pid": 7, "recipe": "t",
                                                          "started_at": "then"}).encode())
    assert main(["run", str(recipe), "--out", f"{bucket}/held", "--executor", "local"]) == 1
    err = capsys.readouterr().err
    assert "in use by another curate run: pid 7 on host elsewhere.example" in err
    assert f"delete the object {bucket}/held/.curate-lock" in err
    assert s3fs().find("bkt/held") == ["bkt/held/.curate-lock"]   # nothing else written
    _no_local_scheme_folder(tmp_path)
    assert not Path(tmp_path, "s3:").exists()
