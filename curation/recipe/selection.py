"""Recipe settings that act on model scores across the corpus: a source's `select:` (keep the top
fraction per language) and the score a MinHash survivor rule may use (`dedup.minhash.keep:
highest_quality`).

A source *scores* a field when one of its filters writes it (`{type: quality, field: F}`, or a
`toxicity` step with `field: F`) or when its input carries it (`input.metadata_fields`, e.g. a
dataset's published educational-quality score). A source *has a language* when a `language`,
`quality` or `toxicity` step sets `meta["language"]`, or its input carries `language`. Both are
checked at validation, so a recipe that would select on a score nobody wrote does not run.

    sources:
      - name: web_en
        filters: [..., {type: quality, model: ..., field: quality_score}]
        select: {top_fraction: 0.1, by: language, field: quality_score}   # pool: default

Sources in the same `pool` (default `default`) are ranked together, one threshold per language over
all of their documents, and must declare the same settings (write them once as a YAML anchor); give
a source its own `pool:` to select within it alone.
"""
from __future__ import annotations

from decimal import Decimal
from typing import Literal

from pydantic import Field, model_validator

from curation.recipe.base import NAME_PATTERN, Strict
from curation.recipe.filters import LanguageFilter, QualityScore, Toxicity

ALL = "(all)"   # the group name of `by: none`


class Select(Strict):
    """Keep the `top_fraction` of documents per language rated highest by `field` (FineWeb2-HQ+ keeps
    10% per language), over every document of the sources in its `pool` that reaches the step
    (after exact, near-duplicate and decontamination removal); the rest are dropped as
    `below_quality_quantile`. Exactly ceil(top_fraction × n) documents of a language are kept, ordered
    by score (highest first), ties by canonical order (recipe source order, shard, row): see
    `curation.corpus.select`."""
    top_fraction: float | dict[str, float] = 0.1
    by: Literal["language", "none"] = "language"
    field: str = Field(default="quality_score", min_length=1)
    pool: str = Field(default="default", pattern=NAME_PATTERN)

    def settings(self) -> dict:
        """What the sources of one pool must agree on."""
        return self.model_dump(mode="json", exclude={"pool"})

    @model_validator(mode="after")
    def _fractions(self):
        f = self.top_fraction if isinstance(self.top_fraction, dict) else {"default": self.top_fraction}
        if "default" not in f:
            raise ValueError(f"a per-language top_fraction map needs a `default` entry, got {sorted(f)}")
        if bad := {k: v for k, v in f.items() if not 0 < v <= 1}:
            raise ValueError(f"top_fraction must lie in (0, 1], got {bad}")
        if self.by == "none" and isinstance(self.top_fraction, dict):
            raise ValueError("`by: none` selects one group over all languages: give top_fraction as one number")
        return self

    def fraction(self, group: str) -> Decimal:
        """The group's fraction as the decimal the recipe writes (0.1 is 1/10, not the float 0.1000…0555),
        so that ceil(fraction × n) has no binary rounding error."""
        f = self.top_fraction
        value = f.get(group, f.get(group.split("_")[0], f["default"])) if isinstance(f, dict) else f
        return Decimal(repr(value))


def scored_fields(src) -> set[str]:
    """The metadata fields holding a score on every record of `src` after its process chain. A classifier
    with `uncovered_languages: pass` leaves the documents of languages its card does not cover unscored,
    so its field is not on every record."""
    fields = {f.field for f in _classifiers(src) if f.field and f.uncovered_languages != "pass"}
    return fields | set(src.input.metadata_fields)


def _classifiers(src) -> list:
    return [f for f in src.filters if isinstance(f, (QualityScore, Toxicity))]


def has_language(src) -> bool:
    return any(isinstance(f, (LanguageFilter, QualityScore, Toxicity)) for f in src.filters) or \
        "language" in src.input.metadata_fields


def _unscored(field: str, where: str, src) -> str:
    if any(f.field == field and f.uncovered_languages == "pass" for f in _classifiers(src)):
        return (f"{where}: source {src.name!r} writes meta[{field!r}] with `uncovered_languages: pass`, which "
                f"leaves documents of languages the model does not cover unscored; {where} needs a score on "
                f"every document: use `uncovered_languages: refuse` (quarantines them), or keep those "
                f"languages out with a `language` filter before the classifier")
    return (f"{where}: source {src.name!r} never writes meta[{field!r}]; add "
            f"`{{type: quality, model: ..., field: {field}}}` to its filters (or list {field!r} in its "
            f"input.metadata_fields when the data carries the score)")


def pools(recipe) -> dict[str, list]:
    """Pool name -> its sources (those with `select:`), in recipe order."""
    out: dict[str, list] = {}
    for src in recipe.sources:
        if src.select is not None:
            out.setdefault(src.select.pool, []).append(src)
    return out


def check_select(src) -> None:
    """A source's `select` must rank a text score it writes, by a language it has (a ValueError says how)."""
    sel = src.select
    if sel is None:
        return
    if src.modality != "text":
        raise ValueError(f"`select` ranks documents by a text score; {src.modality} sources cannot take it")
    if sel.field not in scored_fields(src):
        raise ValueError(_unscored(sel.field, "select", src))
    if sel.by == "language" and not has_language(src):
        raise ValueError(f"select (by: language): source {src.name!r} has no language; add a `language` filter "
                         f"or a `quality` step (it identifies the language), or use `by: none`")


def check_scores(recipe) -> None:
    """Sources of one pool agree on its rule; a score-driven survivor rule has a score on every source MinHash
    compares (text, and interleaved documents by their joined text)."""
    for pool, sources in pools(recipe).items():
        first = sources[0]
        for src in sources[1:]:
            if src.select.settings() != first.select.settings():
                raise ValueError(f"select pool {pool!r}: sources {first.name!r} and {src.name!r} declare different "
                                 f"settings ({first.select.settings()} vs {src.select.settings()}); a pool is "
                                 f"ranked with one rule: use the same settings (a YAML anchor) or another `pool:`")
    mh = recipe.dedup.minhash
    if mh is not None and mh.keep == "highest_quality":
        if mh.score_field is None:
            raise ValueError("dedup.minhash.keep: highest_quality needs dedup.minhash.score_field, the metadata "
                             "field a `quality` step writes (e.g. score_field: quality_score)")
        for src in recipe.sources:
            if src.modality in ("text", "interleaved") and mh.score_field not in scored_fields(src):
                raise ValueError(_unscored(mh.score_field, "dedup.minhash.keep: highest_quality", src))
