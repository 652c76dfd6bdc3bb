"""Ordinary operator faults are exit 1 (or 2) with one sentence naming the path and what to do, never
"internal error (a bug in curate)" with exit 70: on 32447ae a read-only output folder, a finished run
re-run in one, a full disk, a folder given to `verify`/`train` and `verify --relocate` of a manifest
copied without its output all ended in exit 70 with a traceback.

A read-only or full disk is a tmpfs mounted for the test (chmod cannot make a folder read-only for root);
the tests that need one skip, with the reason, where mounting is not permitted."""
from __future__ import annotations

import os
import shutil
import subprocess

import pytest

from curation.commands.cli import main
from tests.benchmarks.compare_outputs import compare
from tests.outdirs import tiny_recipe


def _mount(path, options: str) -> bool:
    return subprocess.run(["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(path)],
                          capture_output=True).returncode == 0


@pytest.fixture
def tmpfs(tmp_path):
    """mount(path, options) / remount(path, options); everything is unmounted afterwards."""
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root (a read-only or full disk cannot be simulated otherwise)")
    probe = tmp_path / "probe"
    probe.mkdir()
    if not _mount(probe, "size=64k"):
        pytest.skip("mount -t tmpfs is not permitted here (a container without CAP_SYS_ADMIN?)")
    mounted = [probe]

    def mount(path, options):
        path.mkdir(parents=True, exist_ok=True)
        assert _mount(path, options)
        mounted.append(path)

    def remount(path, options):
        assert subprocess.run(["mount", "-o", f"remount,{options}", str(path)], capture_output=True).returncode == 0

    yield mount, remount
    for path in reversed(mounted):
        subprocess.run(["umount", str(path)], capture_output=True)


def _err(capsys) -> str:
    err = capsys.readouterr().err
    assert "internal error" not in err and "Traceback" not in err, err
    return err


@pytest.mark.slow
def test_read_only_output_folder(tmp_path, tmpfs, capsys):
    mount, remount = tmpfs
    recipe = tiny_recipe(tmp_path / "r")
    ro = tmp_path / "ro"
    mount(ro, "size=1m,ro")
    assert main(["run", str(recipe), "--out", str(ro / "out"), "--executor", "local"]) == 1
    assert f"cannot write the output folder {ro / 'out'} (Read-only file system); give --out a writable folder" \
        in _err(capsys)
    # a finished run, re-run once its folder is read-only: the sentence, not a traceback
    done = tmp_path / "done"
    mount(done, "size=64m")
    assert main(["run", str(recipe), "--out", str(done), "--executor", "local", "-q"]) == 0
    remount(done, "ro")
    capsys.readouterr()
    assert main(["run", str(recipe), "--out", str(done), "--executor", "local"]) == 1
    assert f"cannot write the output folder {done} (Read-only file system)" in _err(capsys)
    assert main(["verify", str(done / "manifests" / "pretrain.json")]) == 0   # its outputs still read


@pytest.mark.slow
@pytest.mark.parametrize("executor", ["local", "ray"])   # Ray wraps the task's OSError: the sentence is the cause's
def test_full_disk_says_so_and_the_resume_is_byte_identical(tmp_path, tmpfs, capsys, executor):
    mount, remount = tmpfs
    recipe = tiny_recipe(tmp_path / "r")
    reference = tmp_path / "reference"
    assert main(["run", str(recipe), "--out", str(reference), "--executor", "local", "-q"]) == 0
    full = tmp_path / "full"
    mount(full, "size=160k")
    capsys.readouterr()
    assert main(["run", str(recipe), "--out", str(full), "--executor", executor, "--workers", "2", "-q"]) == 1
    err = _err(capsys)
    assert "no space left on the device: free space or choose a larger disk, then run the command again" in err
    assert f"{full}/" in err and "(errno 28)" in err and "(path not reported)" not in err
    remount(full, "size=64m")
    assert main(["run", str(recipe), "--out", str(full), "--executor", "local", "-q"]) == 0
    assert compare(reference, full) == []


def test_verify_and_train_given_a_folder(tmp_path, capsys):
    (tmp_path / "manifests").mkdir()
    (tmp_path / "manifests" / "stage1.json").write_text("{}")
    for cmd in (["verify", str(tmp_path)], ["train", str(tmp_path), "--out", str(tmp_path / "t")]):
        assert main(cmd) == 2
        assert f"{tmp_path} is a folder; give a manifest file, e.g. {tmp_path}/manifests/stage1.json" in _err(capsys)
    assert main(["verify", str(tmp_path / "missing.json")]) == 4
    assert "manifest not found; give a manifest a run wrote" in _err(capsys)


@pytest.mark.slow
def test_relocate_of_a_manifest_copied_without_its_output(text_run, tmp_path, capsys):
    lone = tmp_path / "copy" / "manifests"
    lone.mkdir(parents=True)
    shutil.copy(text_run.out / "manifests" / "stage1.json", lone)
    assert main(["verify", "--relocate", str(lone / "stage1.json")]) == 1
    err = _err(capsys)
    assert "is missing: the manifest was copied without its output folder; copy the whole folder" in err
    assert sorted(p.name for p in (tmp_path / "copy").iterdir()) == ["manifests"]   # nothing written
