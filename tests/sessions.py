"""Expensive work done once and shared: the end-to-end recipe runs, the embedded Ray, the built wheel,
a two-node cluster. `tests/conftest.py` exposes these fixtures to every test; a new slow test should
take one of them instead of running a recipe, starting Ray or building the wheel again (the suite's
time is mostly these, see reports/benchmarks/suite.md).

Sharing rules: a test must not modify what a shared fixture returns (copy it first, as
`test_curate_train_runs_on_the_stage` does); a cluster fixture is module-scoped because a live
cluster captures a later `ray.init()` without an address (Ray finds it through RAY_TMPDIR's
`ray_current_cluster`), so it must end before the tests of the next module start the embedded Ray.

Under pytest-xdist (`.ci/run`: `-n 2 --dist loadfile`) each worker is a process of its own, with its own
RAY_TMPDIR (tests/conftest.py) and its own embedded Ray; a module's tests all run on one worker, so a
module-scoped cluster starts once. The runs and the wheel are made once for the whole session (`_once`):
the first worker to ask makes them, the other waits for it and reads its result.
"""
from __future__ import annotations

import fcntl
import os
import pickle
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

import pytest

REPO = Path(__file__).resolve().parents[1]

# what a copy of the checkout for a wheel build leaves out: setuptools never cleans build/, so stale
# modules would ship, and a venv or egg-info would be packaged or confuse pip
WHEEL_SKIP = shutil.ignore_patterns(".git", ".venv", "out", "build", "dist", "*.egg-info", "__pycache__",
                                    ".pytest_cache", "*.pyc")


T = TypeVar("T")


def _once(tmp_path_factory, name: str, make: Callable[[Path], T]) -> T:
    """`make(folder)` once per test session, whichever xdist worker asks first; a worker that asks later
    waits on the lock and unpickles the first one's result (its files are in the session's shared temp
    folder). A `make` that failed leaves nothing behind: the next worker to ask tries again."""
    base = tmp_path_factory.getbasetemp()
    root = base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base   # xdist: <session>/popen-gwN
    folder, result = root / f"once-{name}", root / f"once-{name}.pickle"
    with open(root / f"once-{name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)      # released when the file closes, also if `make` raises
        if result.exists():
            return pickle.loads(result.read_bytes())
        shutil.rmtree(folder, ignore_errors=True)
        folder.mkdir()
        made = make(folder)
        result.write_bytes(pickle.dumps(made))
        return made


def _recipe_run(name: str) -> Callable[[Path], object]:
    def make(folder: Path):
        from curation.commands.run import run
        return run(REPO / "recipes" / f"{name}.yaml", folder / "out", progress=False)
    return make


@pytest.fixture(scope="session")
def text_run(tmp_path_factory):
    """The text demo (recipes/text.yaml) run once with the local executor (the determinism reference);
    tests must not modify its output."""
    return _once(tmp_path_factory, "text", _recipe_run("text"))


@pytest.fixture(scope="session")
def demo_run(tmp_path_factory):
    """The multimodal demo (recipes/demo.yaml) run once with the local executor; tests must not modify
    its output (copy it: training writes consumed tokens into the ledger)."""
    return _once(tmp_path_factory, "demo", _recipe_run("demo"))


@pytest.fixture(scope="session")
def audio_run(tmp_path_factory):
    """recipes/audio.yaml run once with the local executor; tests must not modify its output (copy it
    with `private_copy`)."""
    return _once(tmp_path_factory, "audio", _recipe_run("audio"))


@pytest.fixture(scope="session")
def images_run(tmp_path_factory):
    """recipes/images.yaml run once with the local executor; tests must not modify its output."""
    return _once(tmp_path_factory, "images", _recipe_run("images"))


@pytest.fixture(scope="session")
def interleaved_run(tmp_path_factory):
    """recipes/interleaved.yaml run once with the local executor; tests must not modify its output."""
    return _once(tmp_path_factory, "interleaved", _recipe_run("interleaved"))


@pytest.fixture(scope="session")
def long_context_run(tmp_path_factory):
    """recipes/long_context.yaml run once with the local executor; tests must not modify its output."""
    return _once(tmp_path_factory, "long_context", _recipe_run("long_context"))


def private_copy(out: Path, dest: Path, *, handoff: bool = False) -> Path:
    """A copy of a shared run's output folder to modify (resume, train: training writes consumed tokens
    into the ledger). `handoff`: only what a trainer reads (no raw/, work/, processed/), with every
    stage's hand-off files relocated to the copy."""
    if not handoff:
        shutil.copytree(out, dest, symlinks=True)
        return dest
    from curation.mixture.handoffs import relocate_handoff
    shutil.copytree(out, dest, symlinks=True, ignore=shutil.ignore_patterns("raw", "work", "processed"))
    for manifest in (dest / "manifests").glob("*.json"):
        relocate_handoff(manifest)
    return dest


@pytest.fixture
def ray_local():
    """The embedded loopback Ray, started once and shared by the tests that need Ray (a `RayExecutor`
    joins a running Ray instead of starting its own); the cluster tests stop it and start their own,
    and the next test that asks for it starts it again."""
    import ray
    if not ray.is_initialized():
        ray.init(num_cpus=2, include_dashboard=False, _node_ip_address="127.0.0.1", logging_level="ERROR",
                 log_to_driver=False, configure_logging=True)
    yield


@pytest.fixture(scope="module")
def two_node_cluster():
    """A real two-node Ray cluster on loopback (`ray.cluster_utils.Cluster`, one CPU per node), shared
    by the tests of one module; the embedded Ray is stopped first (a run must join this cluster)."""
    import ray
    from ray.cluster_utils import Cluster

    if ray.is_initialized():
        ray.shutdown()
    cluster = Cluster(initialize_head=True, connect=False,
                      head_node_args={"num_cpus": 1, "node_ip_address": "127.0.0.1", "include_dashboard": False})
    cluster.add_node(num_cpus=1, node_ip_address="127.0.0.1")
    cluster.wait_for_nodes()
    try:
        yield cluster
    finally:
        cluster.shutdown()


@pytest.fixture(scope="session")
def wheel(tmp_path_factory) -> Path:
    """The distribution's wheel, built once from a copy of the checkout (`pip wheel --no-deps
    --no-build-isolation`, offline; the checkout stays clean)."""
    def build(tmp: Path) -> Path:
        src = tmp / "src"
        shutil.copytree(REPO, src, ignore=WHEEL_SKIP)
        p = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q",
                            "-w", str(tmp / "dist"), str(src)], capture_output=True, text=True, timeout=600)
        assert p.returncode == 0, p.stderr[-3000:]
        [built] = (tmp / "dist").glob("curate_llm-*.whl")
        return built
    return _once(tmp_path_factory, "wheel", build)
