"""Shared fixtures: Ray on loopback with its own temp dir, small recipes; the expensive shared runs,
Ray clusters and the wheel are in tests/sessions.py (imported here so every test can take them)."""
from __future__ import annotations

import gzip
import json
import os
import shutil
import tempfile
from pathlib import Path

from tests.sessions import (  # noqa: F401
    audio_run,
    demo_run,
    images_run,
    interleaved_run,
    long_context_run,
    ray_local,
    text_run,
    two_node_cluster,
    wheel,
)

REPO = Path(__file__).resolve().parents[1]
TEXT_DEMO = REPO / "recipes" / "text.yaml"
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
