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
