"""The closed registries a recipe selects from: modalities (`modality:`) and, per modality, its steps.

Adding a modality is one folder under `steps/` with a `modality.py` and one line here; adding a
filter type is its config model in `curation/recipe/filters.py` and its class in the text
modality's `FILTERS`. A recipe can never reach anything else (it never imports code).
"""
from __future__ import annotations

from curation.steps.audio.modality import AUDIO
from curation.steps.compliance.optout import RobotsOptOut
from curation.steps.image.modality import IMAGE
from curation.steps.image.read import ImageCheck
from curation.steps.interleaved.modality import INTERLEAVED
from curation.steps.modality import Modality
from curation.steps.text.filters.quality import ToxicityStep
from curation.steps.text.modality import TEXT
from curation.steps.text.pii import PIIRedactor

MODALITIES: dict[str, Modality] = {m.name: m for m in (TEXT, IMAGE, AUDIO, INTERLEAVED)}

# steps that contribute ledger tables (`ledger_tables`, `ledger_rows(run, source, summed stats)`)
LEDGER_STEPS = (PIIRedactor, RobotsOptOut, ToxicityStep, ImageCheck)
