"""A missing extra is one sentence naming the pip command; a present one passes; spaCy comes without torch."""
import importlib.util

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


_SPACY_PROBE = """
import json, sys
{first}
from curation.steps.text.filters.word_cache import WordCache
from curation.steps.text.minhash import Shingler
cache = WordCache.for_language("eng")
words = cache.view("Dr. Smith's e-mail isn't here: 3.5km away... OK?").words
shingles = Shingler.cached(2).hashes("It's a test, of the shingler.").tolist()
after = "torch" in sys.modules
import torch
print(json.dumps({{"torch_after_spacy": after, "torch_ok": torch.ones(2).sum().item() == 2.0,
                  "words": words, "shingles": shingles}}))
"""


def _probe(first: str) -> dict:
    import json
    import subprocess
    import sys
    p = subprocess.run([sys.executable, "-c", _SPACY_PROBE.format(first=first)], capture_output=True, text=True,
                       check=True)
    return json.loads(p.stdout)


@pytest.mark.slow
@pytest.mark.skipif(importlib.util.find_spec("torch") is None, reason="torch is not installed: nothing to hide")
def test_spacy_is_imported_without_torch_and_torch_still_imports_after():
    """A text worker builds its word tokenizers without importing torch (1.8 s and 180 MB per process), and
    torch imports normally afterwards; with torch imported first the tokens are the same."""
    hidden = _probe("")
    assert hidden["torch_after_spacy"] is False and hidden["torch_ok"]
    assert hidden["words"][:4] == ["Dr.", "Smith", "'s", "e"]
    with_torch = _probe("import torch")
    assert with_torch["torch_ok"] and (with_torch["words"], with_torch["shingles"]) == \
        (hidden["words"], hidden["shingles"])
