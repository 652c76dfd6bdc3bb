"""`curate demo DIR` copies the shipped recipes and vocabularies side by side, never overwriting an edit."""
import pytest

from curation.commands.demo import data_root, materialise
from curation.errors import CurateError
from tests.conftest import REPO


def test_demo_copies_recipes_and_tokenizers_and_keeps_edits(tmp_path):
    assert data_root() == REPO                        # a checkout reads them in place
    recipe = materialise(tmp_path / "d")
    assert recipe == tmp_path / "d" / "recipes" / "demo.yaml"
    for rel in ("recipes/demo.yaml", "recipes/demo/corpus", "tokenizers/curate-demo-v1.yaml",
                "tokenizers/curate-demo-bpe.json", "recipes/images.yaml"):
        assert (tmp_path / "d" / rel).exists()
    assert recipe.read_bytes() == (REPO / "recipes" / "demo.yaml").read_bytes()
    assert not list((tmp_path / "d").rglob("__pycache__"))
    materialise(tmp_path / "d")                       # again: nothing to do
    recipe.write_text(recipe.read_text() + "\n# my edit\n")
    with pytest.raises(CurateError, match=r"already holds other versions of 1 file\(s\) \(e.g. recipes/demo.yaml\)"):
        materialise(tmp_path / "d")
    assert recipe.read_text().endswith("# my edit\n")
