"""One run per output folder (the lock), and one recipe per output folder (`--force` replaces another's).
On 32447ae a second run into a busy folder died with a bare FileNotFoundError from a task, and a second
recipe into a used folder left the first one's shards under tokenized/."""
from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time

import pytest

from curation.commands.cli import main
from curation.core.outlock import LOCK, OutputLock
from curation.errors import CurateError
from tests.conftest import REPO
from tests.outdirs import tiny_recipe


def _dead_pid() -> int:
    p = subprocess.Popen([sys.executable, "-c", "pass"])
    p.wait()
    return p.pid


def test_a_held_lock_refuses_a_second_holder(tmp_path):
    with OutputLock(tmp_path, recipe="r", started_at="2026-01-01T00:00:00Z") as first:
        first.update(fingerprint="abc")
        held = json.loads((tmp_path / LOCK).read_text())
        assert (held["host"], held["pid"], held["recipe"], held["fingerprint"]) == \
            (socket.gethostname(), os.getpid(), "r", "abc")
        with pytest.raises(CurateError, match=f"in use by another curate run: pid {os.getpid()} on host "
                                              f"{socket.gethostname()}, recipe 'r', fingerprint abc, started "
                                              f"2026-01-01T00:00:00Z; wait for it to finish"):
            OutputLock(tmp_path, recipe="s").acquire()
    assert not (tmp_path / LOCK).exists()


def test_a_stale_lock_is_taken_over_with_a_note(tmp_path, capsys):
    pid = _dead_pid()
    (tmp_path / LOCK).write_text(json.dumps({"host": socket.gethostname(), "pid": pid, "recipe": "old",
                                             "started_at": "then"}))
    with OutputLock(tmp_path, recipe="new"):
        assert json.loads((tmp_path / LOCK).read_text())["recipe"] == "new"
    assert f"taking over the stale lock of pid {pid}" in capsys.readouterr().err


def test_a_lock_from_another_host_is_never_taken_over(tmp_path):
    (tmp_path / LOCK).write_text(json.dumps({"host": "elsewhere.example", "pid": 1, "recipe": "old"}))
    with pytest.raises(CurateError, match=f"cannot tell whether that run is still going; if it is not, remove the "
                                          f"file {tmp_path / LOCK}"):
        OutputLock(tmp_path, recipe="new").acquire()
    assert json.loads((tmp_path / LOCK).read_text())["host"] == "elsewhere.example"


@pytest.mark.slow
def test_two_concurrent_runs_into_one_folder(tmp_path, capsys):
    recipe = tiny_recipe(tmp_path / "r")
    out = tmp_path / "out"
    first = subprocess.Popen([sys.executable, "-m", "curation.commands.cli", "run", str(recipe), "--out", str(out),
                              "--executor", "local", "-q"], cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    deadline = time.time() + 120
    while not (out / LOCK).exists() and first.poll() is None and time.time() < deadline:
        time.sleep(0.05)
    assert (out / LOCK).exists(), first.communicate()
    assert main(["run", str(recipe), "--out", str(out), "--executor", "local"]) == 1
    err = capsys.readouterr().err
    assert f"{out} is in use by another curate run: pid {first.pid} on host {socket.gethostname()}, recipe 't'" in err
    assert "Traceback" not in err
    assert first.wait(300) == 0, first.communicate()
    assert not (out / LOCK).exists()


@pytest.mark.slow
def test_another_recipe_is_refused_unless_forced_and_force_leaves_nothing_of_it(tmp_path, capsys):
    out = tmp_path / "out"
    old = tiny_recipe(tmp_path / "old", sources=("a", "b"), name="old")
    assert main(["run", str(old), "--out", str(out), "--executor", "local", "-q"]) == 0
    assert (out / "tokenized" / "b" / "b.bin").is_file()
    new = tiny_recipe(tmp_path / "new", sources=("a", "c"), name="new")
    assert main(["run", str(new), "--out", str(out), "--executor", "local", "-q"]) == 2
    err = capsys.readouterr().err
    assert f"--out {out} holds the outputs of recipe 'old', not 'new'" in err and "--force" in err
    assert not (out / "tokenized" / "c").exists()         # refused before any work
    assert main(["run", str(new), "--out", str(out), "--executor", "local", "-q", "--force"]) == 0
    for area in ("processed", "tokenized", "quarantine", "ledger/decisions", "work/markers/process",
                 "work/markers/tokenize", "work/markers/merge"):
        assert not list((out / area).glob("b*")) and not list((out / area).glob("*/b*")), area
    assert sorted(p.name for p in (out / "tokenized").iterdir()) == ["a", "c"]
    assert not any("b" == p.parent.name for p in (out / "work").rglob("*"))
    assert json.loads((out / ".curate-recipe.json").read_text()) == {"recipe": "new"}
    assert main(["verify", str(out / "manifests" / "pretrain.json")]) == 0
