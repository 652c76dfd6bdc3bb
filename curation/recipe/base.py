"""Shared pieces of the recipe models: strict, frozen models and the name pattern.

Every float in a recipe must be finite (`.inf`/`.nan` are errors); upper bounds live in
`curation.recipe.limits`."""
from __future__ import annotations

from pydantic import BaseModel, ConfigDict

NAME_PATTERN = r"^[a-z0-9][a-z0-9_\-]{0,63}$"


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)
