"""A missing extra is one sentence naming the pip command; a present one passes."""
import pytest

from curation.core import extras
from curation.errors import CurateError


def test_missing_extra_names_the_install_command(monkeypatch):
    monkeypatch.setitem(extras.EXTRAS, "images", ("json", "no_such_module_curate"))
    assert extras.missing("images") == ["no_such_module_curate"]
    with pytest.raises(CurateError, match=r"^image sources: the optional dependencies no_such_module_curate "
                                          r"are not installed; pip install 'curate-llm\[images\]'$"):
        extras.require("images", "image sources")
    monkeypatch.setitem(extras.EXTRAS, "images", ("json",))
    extras.require("images", "image sources")
