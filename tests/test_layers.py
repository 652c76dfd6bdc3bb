"""The package's layers (docs/ARCHITECTURE.md, Layers): every import of a curation module points down, never up,
and the import graph has no cycle. Function-local imports count like top-level ones, so deferring an
import (to keep an optional dependency such as torch out of a text-only run) can never hide an arrow
that runs the wrong way."""
from __future__ import annotations

import ast
from pathlib import Path

from tests.conftest import REPO

PACKAGE = REPO / "curation"

# lowest first; packages on one level are peers and may not import each other
LAYERS = [
    ["errors", ""],
    ["core"],
    ["recipe"],
    ["shards", "acquire"],
    ["steps"],
    ["corpus"],
    ["plan"],
    ["runtime"],
    ["ledger"],
    ["mixture"],
    ["report", "train", "classify"],
    ["commands"],
]
LEVEL = {pkg: i for i, level in enumerate(LAYERS) for pkg in level}


def _modules() -> dict[str, Path]:
    mods = {}
    for path in PACKAGE.rglob("*.py"):
        rel = path.relative_to(REPO).with_suffix("")
        name = ".".join(rel.parts)
        mods[name.removesuffix(".__init__")] = path
    return mods


def _imports(name: str, path: Path, mods: dict[str, Path]) -> set[str]:
    """Curation modules imported by `name`, anywhere in its body (function-local imports included)."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        targets = []
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(parts + ([base] if base else []))
            targets = [f"{base}.{a.name}" for a in node.names] + [base]
        for t in targets:
            while t and t not in mods:
                t = t.rpartition(".")[0]
            if t and t.startswith("curation") and t != name:
                found.add(t)
    return found


def _layer(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else ""


def _graph() -> dict[str, set[str]]:
    mods = _modules()
    return {m: _imports(m, p, mods) for m, p in mods.items()}


def test_every_module_belongs_to_a_layer():
    unknown = sorted({_layer(m) for m in _graph()} - set(LEVEL))
    assert not unknown, f"packages outside the layer table: {unknown}; add them to LAYERS and to the layer table of docs/ARCHITECTURE.md (python -m tests.test_docs)"


def test_imports_point_down():
    graph = _graph()
    wrong = []
    for mod, targets in sorted(graph.items()):
        for t in sorted(targets):
            a, b = _layer(mod), _layer(t)
            if t in ("curation",) or a == b:
                continue
            if LEVEL[b] >= LEVEL[a]:
                wrong.append(f"{mod} -> {t} ({a} may not import {b})")
    assert not wrong, "imports that run up or sideways:\n" + "\n".join(wrong)


def test_no_import_cycles():
    graph = _graph()
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    cycles = []

    def visit(v: str) -> None:  # Tarjan's strongly connected components
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                cycles.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    assert not cycles, f"import cycles: {cycles}"


def test_modules_stay_small():
    big = sorted((sum(1 for _ in p.open()), str(p.relative_to(REPO))) for p in PACKAGE.rglob("*.py"))
    assert big[-1][0] <= 400, f"modules over 400 lines: {[b for b in big if b[0] > 400]}"


def test_test_file_names_are_unique():
    """pytest's default import mode imports each test file by its base name: two with the same name in
    different folders stop the whole suite at collection."""
    seen: dict[str, Path] = {}
    for path in sorted((REPO / "tests").rglob("test_*.py")):
        assert path.name not in seen, f"{path} and {seen[path.name]} share a name; rename one"
        seen[path.name] = path
