"""The closed registry of filter types a recipe may name (`type:` in `filters:`).

Adding a step type means adding its config model to `recipe/schema.py` and its class here;
a recipe can never reach anything else.
"""
from __future__ import annotations

from pathlib import Path

from curation.core.record import QuarantineSink
from curation.recipe import schema
from curation.recipe.filters import QualityScore, Toxicity
from curation.steps.base import Step
from curation.steps.text.filters import DatatroveFilter, LanguageFilter, LengthFilter
from curation.steps.text.quality import QualityStep, ToxicityStep

FILTERS: dict[type, type[Step]] = {
    schema.LengthFilter: LengthFilter,
    schema.GopherQualityFilter: DatatroveFilter,
    schema.GopherRepetitionFilter: DatatroveFilter,
    schema.C4QualityFilter: DatatroveFilter,
    schema.FineWebQualityFilter: DatatroveFilter,
    schema.LanguageFilter: LanguageFilter,
    QualityScore: QualityStep,
    Toxicity: ToxicityStep,
}


def build_filter(cfg, *, source: str, sink: QuarantineSink, base_dir: Path) -> Step:
    cls = FILTERS[type(cfg)]
    if cls in (LanguageFilter, QualityStep, ToxicityStep):  # they name model files relative to the recipe
        return cls(cfg, source=source, sink=sink, base_dir=base_dir)
    return cls(cfg, source=source, sink=sink)
