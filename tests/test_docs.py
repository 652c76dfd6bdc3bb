"""The repository explains itself: docs/ARCHITECTURE.md's layer table is generated from the layer
rules `tests/test_layers.py` enforces (regenerate with `python -m tests.test_docs`), every module a
doc names exists, and the pages link to each other."""
from __future__ import annotations

import re
import sys

from tests.conftest import REPO
from tests.test_layers import LAYERS

DOCS = REPO / "docs"
ARCH = DOCS / "ARCHITECTURE.md"
START, END = "<!-- layers:start", "<!-- layers:end -->"


def _modules(pkg: str) -> int:
    if pkg == "":
        return 1                                    # curation/__init__.py
    path = REPO / "curation" / pkg
    return len(list(path.rglob("*.py"))) if path.is_dir() else 1


def layer_table() -> str:
    """The layer table: highest level first, with the number of modules in each level."""
    rows = ["level  package(s)                modules"]
    for level in range(len(LAYERS) - 1, -1, -1):
        names = ", ".join(p if p else "(curation/__init__)" for p in LAYERS[level])
        rows.append(f"{level:>4}   {names:<28}{sum(map(_modules, LAYERS[level])):>5}")
    return "```\n" + "\n".join(rows) + "\n```"


def _block(text: str) -> str:
    start = text.index(START)
    return text[text.index("\n", start) + 1: text.index(END)].strip()


def test_the_layer_table_is_generated_from_the_layer_rules():
    assert _block(ARCH.read_text()) == layer_table(), "docs/ARCHITECTURE.md is stale: run `python -m tests.test_docs`"


def test_every_module_the_docs_name_exists():
    """A path like `plan/size.py` or `core/layout.py` in the docs is a file of the package (or the repo)."""
    missing = []
    for page in DOCS.glob("*.md"):
        for ref in set(re.findall(r"`((?:[a-z_]+/)+[a-z_]+\.py)`", page.read_text())):
            if not ((REPO / "curation" / ref).is_file() or (REPO / ref).is_file()):
                missing.append(f"{page.name}: {ref}")
    assert not missing, missing


def test_the_pages_link_each_other_and_the_readme_links_them():
    readme = (REPO / "README.md").read_text()
    for name in ("ARCHITECTURE.md", "CONTRIBUTING.md", "FIELD-NOTES.md", "CHANGELOG.md"):
        assert (DOCS / name).is_file(), name
        assert f"docs/{name}" in readme, f"README.md does not link docs/{name}"


if __name__ == "__main__":
    text = ARCH.read_text()
    start = text.index("\n", text.index(START)) + 1
    ARCH.write_text(text[:start] + layer_table() + "\n" + text[text.index(END):])
    print(f"{ARCH}: layer table written", file=sys.stderr)
