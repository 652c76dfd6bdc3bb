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


def test_several_missing_extras_are_named_in_one_error(monkeypatch):
    monkeypatch.setitem(extras.EXTRAS, "images", ("json", "no_such_image_lib"))
    monkeypatch.setitem(extras.EXTRAS, "audio", ("no_such_audio_lib", "no_such_image_lib"))
    with pytest.raises(CurateError, match=r"^image sources and audio sources: the optional dependencies "
                                          r"no_such_audio_lib, no_such_image_lib are not installed; "
                                          r"pip install 'curate-llm\[images,audio\]'$"):
        extras.require_all(["images", "audio"], "image sources and audio sources")
    monkeypatch.setitem(extras.EXTRAS, "images", ("json",))
    with pytest.raises(CurateError, match=r"pip install 'curate-llm\[audio\]'$"):
        extras.require_all(["images", "audio"], "image sources and audio sources")
    extras.require_all([], "nothing")
