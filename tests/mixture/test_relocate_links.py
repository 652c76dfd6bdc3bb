"""`verify --relocate` writes only inside the folder it relocates: a symlinked `megatron/` (or a symlinked
hand-off file, or ledger) pointing outside is refused, naming the link, before anything is written. On
32447ae it rewrote data_args.txt, args.txt and per_split_data_args.json in the folder the link named."""
from __future__ import annotations

import os
import shutil

import pytest

from curation.commands.cli import main
from curation.commands.run import run
from tests.outdirs import tiny_recipe

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def finished(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("relocate")
    return run(tiny_recipe(tmp / "r"), tmp / "out", progress=False, executor="local").out


def _copy(finished, tmp_path):
    out = tmp_path / "out"
    shutil.copytree(finished, out, symlinks=True)
    return out, out / "manifests" / "pretrain.json"


def _snapshot(folder):
    return {p: p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file() and not p.is_symlink()}


def test_a_symlinked_megatron_folder_is_refused(finished, tmp_path, capsys):
    out, manifest = _copy(finished, tmp_path)
    assert main(["verify", "--relocate", str(manifest)]) == 0   # in place: fine
    elsewhere = tmp_path / "elsewhere"
    shutil.move(out / "megatron", elsewhere)
    os.symlink(elsewhere, out / "megatron")
    before = _snapshot(elsewhere)
    capsys.readouterr()
    assert main(["verify", "--relocate", str(manifest)]) == 1
    err = capsys.readouterr().err
    assert f"{out / 'megatron'} is a symbolic link to {elsewhere}, outside the output folder {out}" in err
    assert _snapshot(elsewhere) == before


@pytest.mark.parametrize("name", ["megatron/pretrain/args.txt", "ledger/ledger.duckdb"])
def test_a_symlinked_file_is_refused(finished, tmp_path, capsys, name):
    out, manifest = _copy(finished, tmp_path)
    outside = tmp_path / "outside" / "file"
    outside.parent.mkdir()
    shutil.move(out / name, outside)
    os.symlink(outside, out / name)
    before = outside.read_bytes()
    ours = _snapshot(out)
    assert main(["verify", "--relocate", str(manifest)]) == 1
    assert f"{out / name} is a symbolic link to {outside}, outside the output folder" in capsys.readouterr().err
    assert outside.read_bytes() == before and _snapshot(out) == ours   # nothing written anywhere
