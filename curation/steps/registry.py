"""The closed registries a recipe selects from: modalities (`modality:`) and, per modality, its steps.

A modality is registered once, in the recipe layer (`curation.recipe.registry`: a built-in line or an entry
point); its declaration names its steps-level `Modality`, which `MODALITIES` loads on first use. Adding a
filter type is its config model in `curation/recipe/filters.py` and its class in the text modality's
`FILTERS`. A recipe can never reach anything else (it never imports code).
"""
from __future__ import annotations

from collections.abc import Iterator, Mapping

import curation.recipe.registry as registry
from curation.steps.compliance.optout import RobotsOptOut
from curation.steps.image.read import ImageCheck
from curation.steps.modality import Modality
from curation.steps.text.filters.quality import ToxicityStep
from curation.steps.text.pii import PIIRedactor


class _Modalities(Mapping[str, Modality]):
    """The steps-level declaration of every registered modality, by name, in registration order (loaded once
    each; after `curation.recipe.registry.reload()` the plug-ins installed since are there too)."""

    def __init__(self) -> None:
        self._loaded: dict[str, tuple[registry.SourceModality, Modality]] = {}

    def __getitem__(self, name: str) -> Modality:
        decl = registry.modality(name)   # an unknown name: the error lists the registered ones
        if name not in self._loaded or self._loaded[name][0] is not decl:
            found = registry.load(decl.steps)
            if not isinstance(found, Modality) or found.name != name:
                raise TypeError(f"modality {name!r}: {decl.steps} is not its curation.steps.modality.Modality")
            self._loaded[name] = (decl, found)
        return self._loaded[name][1]

    def __iter__(self) -> Iterator[str]:
        return iter(registry.registered())

    def __len__(self) -> int:
        return len(registry.registered())


MODALITIES: Mapping[str, Modality] = _Modalities()

# steps that contribute ledger tables (`ledger_tables`, `ledger_rows(run, source, summed stats)`)
LEDGER_STEPS = (PIIRedactor, RobotsOptOut, ToxicityStep, ImageCheck)
