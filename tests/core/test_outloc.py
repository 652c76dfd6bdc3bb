"""`--out` as a local path or a URL: what is written through fsspec, what is refused (exit 2) before any work."""
from __future__ import annotations

from pathlib import Path

import pytest

from curation.commands.cli import main
from curation.core.outloc import is_remote, parse_out
from curation.errors import UsageError
from tests.outdirs import tiny_recipe


def test_paths_and_file_urls_are_local_folders(tmp_path):
    assert parse_out(str(tmp_path / "x")) == tmp_path / "x"
    assert parse_out(f"file://{tmp_path}/x") == tmp_path / "x"
    assert parse_out(f"file://localhost{tmp_path}/x") == tmp_path / "x"
    assert parse_out("s3://bucket/a//b/") == "s3://bucket/a/b"
    assert is_remote("s3://bucket/a") and not is_remote(tmp_path)


@pytest.mark.parametrize("url, why", [
    ("http://example.org/out", "read-only to curate"), ("https://example.org/out", "read-only to curate"),
    ("ftp://host/out", "no atomic write"), ("memory://out", "lives inside one process"),
    ("gs://bucket/out", "not a supported output store"), ("file://otherhost/out", "not this machine"),
    ("s3:///nobucket", "no bucket"), ("s3://bucket/../x", "not allowed")])
def test_unwritable_urls_are_usage_errors(url, why):
    with pytest.raises(UsageError, match=why):
        parse_out(url)


@pytest.mark.parametrize("url", ["http://127.0.0.1:9/out", "ftp://127.0.0.1/out", "memory://out", "gcs://b/x"])
def test_run_refuses_before_writing_anything(tmp_path, monkeypatch, capsys, url):
    """On 32447ae these exited 0 and wrote ./http:/..., ./memory:/... folders."""
    recipe = tiny_recipe(tmp_path / "r")
    work = tmp_path / "cwd"
    work.mkdir()
    monkeypatch.chdir(work)
    assert main(["run", str(recipe), "--out", url, "--executor", "local"]) == 2
    err = capsys.readouterr().err
    assert f"--out {url}" in err and "give a local folder or an s3:// URL" in err and "Traceback" not in err
    assert list(work.iterdir()) == []                     # no `./http:` (or any) folder
    assert not (tmp_path / "r" / "out").exists()


@pytest.mark.slow
def test_file_url_runs_into_the_local_folder(tmp_path, monkeypatch):
    recipe = tiny_recipe(tmp_path / "r")
    monkeypatch.chdir(tmp_path)
    assert main(["run", str(recipe), "--out", f"file://{tmp_path}/o", "--executor", "local", "-q"]) == 0
    assert (tmp_path / "o" / "manifests" / "pretrain.json").is_file()
    assert not Path(tmp_path, "file:").exists()


@pytest.mark.parametrize("cmd", [["slurm", "--nodes", "2", "--cpus-per-node", "2", "--dry-run"], ["ablate"]])
def test_commands_that_need_a_folder_refuse_a_url(tmp_path, monkeypatch, capsys, cmd):
    recipe = tiny_recipe(tmp_path / "r")
    monkeypatch.chdir(tmp_path)
    assert main([cmd[0], str(recipe), *cmd[1:], "--out", "s3://bkt/x"]) == 2
    assert "--out s3://bkt/x:" in capsys.readouterr().err
    assert not (tmp_path / "s3:").exists()


def test_a_task_fetches_only_the_columns_it_reads_of_a_parquet_object(tmp_path):
    """`Remote.get_columns`: the ids of a processed shard without its text (what a resolve task of an
    output URL reads): the same rows in order, a fraction of the object, and no other column to misread."""
    import fsspec
    import pyarrow as pa
    import pyarrow.parquet as pq

    from curation.core.outloc import Remote
    fs = fsspec.filesystem("memory")
    root = f"cols-{tmp_path.name}"
    ids = [f"doc-{i}" for i in range(3000)]
    table = pa.table({"id": ids, "text": [f"{i} " * 400 for i in range(3000)], "meta": ['{"q": 1}'] * 3000})
    pq.write_table(table, tmp_path / "shard.parquet", row_group_size=1000)
    fs.pipe_file(f"{root}/processed/s/0.parquet", (tmp_path / "shard.parquet").read_bytes())
    size = Remote(f"memory://{root}").get_columns("processed/s/0.parquet", tmp_path / "got.parquet", ["id"])
    got = pq.read_table(tmp_path / "got.parquet")
    assert got.column_names == ["id"] and got.column("id").to_pylist() == ids
    assert size == (tmp_path / "got.parquet").stat().st_size < (tmp_path / "shard.parquet").stat().st_size / 10
    with pytest.raises(pa.ArrowInvalid, match="text"):
        pq.read_table(tmp_path / "got.parquet", columns=["text"])


@pytest.mark.slow
def test_reading_a_small_object_is_one_request_and_an_empty_or_missing_one_is_answered(tmp_path):
    """`Remote.cat` (every completion marker a task or a skip check reads): one GET for an object or a missing
    one (s3fs alone sent a HEAD first, and for a missing key a listing too); an empty object, whose range S3
    refuses, still reads as b""."""
    from curation.core.outloc import Remote
    from tests.s3server import make_bucket, s3_server, s3fs
    with s3_server():
        make_bucket("bkt")
        s3fs().pipe_file("bkt/out/a.json", b'{"x": 1}')
        s3fs().pipe_file("bkt/out/empty", b"")
        remote = Remote("s3://bkt/out")
        sent: list[str] = []
        remote.fs.s3.meta.events.register("before-send.s3.*", lambda request, **kw: sent.append(request.method))
        assert remote.cat("a.json") == b'{"x": 1}' and sent == ["GET"]
        sent.clear()
        assert remote.cat("missing.json") is None and sent == ["GET"]
        assert remote.cat("empty") == b""
