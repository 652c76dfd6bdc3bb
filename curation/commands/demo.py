"""`curate demo [DIR]`: write the shipped recipes, their data and the vocabularies into a folder.

The repository's top-level `recipes/` and `tokenizers/` are the source of truth. A built wheel
carries copies of both as `curation/data/` (setup.py's build step); a source checkout (editable
install, PYTHONPATH) reads them where they are. Recipes name their vocabulary and codecs by paths
relative to themselves (`../tokenizers/...`), so the copy keeps the same two folders side by side.
"""
from __future__ import annotations

import filecmp
import shutil
from pathlib import Path

from curation.errors import CurateError

FOLDERS = ("recipes", "tokenizers")


def data_root() -> Path:
    """The folder holding `recipes/` and `tokenizers/`: inside the installed wheel, else the checkout."""
    package = Path(__file__).resolve().parents[1]
    for root in (package / "data", package.parent):
        if (root / "recipes" / "demo.yaml").is_file() and (root / "tokenizers").is_dir():
            return root
    raise CurateError(f"this installation of curate ({package}) has no recipes/ and tokenizers/; reinstall "
                      f"it from a wheel or a source checkout")


def _files(root: Path) -> list[Path]:
    return sorted(p.relative_to(root) for f in FOLDERS for p in (root / f).rglob("*")
                  if p.is_file() and "__pycache__" not in p.parts and p.suffix != ".pyc")


def materialise(dest: Path) -> Path:
    """Copy the recipes and vocabularies into `dest`; return the demo recipe's path there.

    Files already there with the same bytes are left alone; a different file of the same name is
    an error (nothing is overwritten), so a re-run is safe and an edited copy is never lost."""
    root = data_root()
    dest = Path(dest).resolve()
    if dest == root.resolve():
        return dest / "recipes" / "demo.yaml"
    files = _files(root)
    clash = [str(f) for f in files if (dest / f).exists() and not filecmp.cmp(root / f, dest / f, shallow=False)]
    if clash:
        raise CurateError(f"{dest} already holds other versions of {len(clash)} file(s) (e.g. {clash[0]}); "
                          f"choose an empty folder or remove them")
    for f in files:
        target = dest / f
        if not target.exists():
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(root / f, target)
    return dest / "recipes" / "demo.yaml"
