"""Shared fixtures: Ray on loopback with its own temp dir, demo runs shared across tests, small recipes."""
from __future__ import annotations

import gzip
import json
import os
import shutil
import tempfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
DEMO = REPO / "recipes" / "demo.yaml"
VOCAB = REPO / "tokenizers" / "curate-demo-v1.yaml"
SHARED_DATA = REPO.parent / "shared" / "data"

# Ray: loopback only, no usage stats, and a short private temp dir (socket paths are length-limited).
os.environ["RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"] = "0"
os.environ["RAY_USAGE_STATS_ENABLED"] = "0"
_RAY_TMP = tempfile.mkdtemp(prefix="cr-", dir="/tmp")
os.environ["RAY_TMPDIR"] = _RAY_TMP
os.environ.pop("RAY_ADDRESS", None)


def pytest_sessionfinish(session, exitstatus):
    import sys
    if "ray" in sys.modules and sys.modules["ray"].is_initialized():  # the shared Ray of `ray_local`
        sys.modules["ray"].shutdown()
    shutil.rmtree(_RAY_TMP, ignore_errors=True)


@pytest.fixture(scope="session")
def demo_run(tmp_path_factory):
    """The demo recipe run once with the local executor (the determinism reference); tests must not
    modify its output."""
    from curation.commands.run import run
    out = tmp_path_factory.mktemp("demo")
    return run(DEMO, out, progress=False)


@pytest.fixture
def ray_local():
    """The embedded loopback Ray, started once and shared by the tests that need Ray (a `RayExecutor`
    joins a running Ray instead of starting its own); the cluster tests stop it and start their own."""
    import ray
    if not ray.is_initialized():
        ray.init(num_cpus=2, include_dashboard=False, _node_ip_address="127.0.0.1", logging_level="ERROR",
                 log_to_driver=False, configure_logging=True)
    yield


def write_jsonl(path: Path, rows: list, gz: bool = False) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    data = "".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in rows).encode()
    path.write_bytes(gzip.compress(data, mtime=0) if gz else data)
    return path


def english_doc(i: int, words: int = 80) -> str:
    base = ("The river town keeps a small library where volunteers sort donated books every week. "
            "Visitors often ask about the history of the old mill, and the staff answer with stories. ")
    return f"Document {i}. " + " ".join((base * (words // 25 + 1)).split()[:words]) + "."


def make_recipe(tmp: Path, sources: dict[str, list[Path]], filters: str = "[]", extra: str = "",
                license: str = "MIT") -> Path:
    """A recipe over files in `tmp` using the demo vocabulary; `filters` is a YAML flow list; every
    source declares `license` (a recipe without one does not validate)."""
    lines = ["name: t", f"vocabulary: {VOCAB}", extra, "sources:"]
    for name, paths in sources.items():
        lines += [f"  - name: {name}",
                  f"    input: {{paths: {json.dumps([str(p) for p in paths])}, id_field: id}}",
                  f"    filters: {filters}",
                  f"    license: {json.dumps(license)}"]  # last, so the lines above keep their numbers
    path = tmp / "recipe.yaml"
    path.write_text("\n".join(lines) + "\n")
    return path
