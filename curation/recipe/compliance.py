"""Compliance settings of a recipe (Apertus 1.5 §3.1.1): licence classes and policy, PII, approved
constituents of composite collections, the retroactive robots.txt opt-out."""
from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from curation.recipe.base import Strict

# Licence classes, least restrictive first (see curation.steps.compliance.licence_text): `unknown` is a
# licence no rule recognises; `all-rights-reserved` one that grants nothing ("All rights reserved",
# "proprietary", a bare copyright notice). Both are excluded whatever `licence_policy.exclude` says (see
# LicencePolicy); a source used under a separate agreement says so with `license_class`.
LicenceClass = Literal["permissive", "share-alike", "no-derivatives", "non-commercial", "research-only",
                       "unknown", "all-rights-reserved"]


class PII(Strict):
    """Replace personal data in the text (counted per kind in the ledger table `pii`)."""
    kinds: list[Literal["email", "ip", "iban", "phone"]] = ["email", "ip", "iban", "phone"]


class Constituents(Strict):
    """A composite collection: keep only records whose `field` names an approved constituent."""
    field: str
    approved: list[str] = Field(min_length=1)


_ALWAYS_EXCLUDED = ("unknown", "all-rights-reserved")


class LicencePolicy(Strict):
    """Licence classes whose records are excluded (Apertus 1.5 §3.1.1 defaults). It fails closed:
    `all-rights-reserved` and `unknown` are added to `exclude` whatever the recipe lists, so a recipe
    that narrows `exclude` never admits them by omission. `admit_unknown: true` is the one way to
    admit licences no rule recognises; the sources table's `licence_decision` then says so."""
    exclude: list[LicenceClass] = ["non-commercial", "research-only", "share-alike", "no-derivatives"]
    admit_unknown: bool = False

    @model_validator(mode="before")
    @classmethod
    def _fail_closed(cls, data):
        if not isinstance(data, dict):
            return data
        exclude = data.get("exclude", cls.model_fields["exclude"].default)
        if not isinstance(exclude, list) or not all(isinstance(c, str) for c in exclude):
            return data  # the field's own validation names the problem
        added = [c for c in _ALWAYS_EXCLUDED if not (c == "unknown" and data.get("admit_unknown") is True)]
        if data.get("admit_unknown") is True and "unknown" in exclude:
            raise ValueError("admit_unknown is true but exclude lists unknown; keep one of them")
        return {**data, "exclude": [*exclude, *(c for c in added if c not in exclude)]}

    def excluded(self) -> list[str]:
        """The classes excluded, in a fixed order (what the plan hands the licence step)."""
        return sorted(set(self.exclude))


class OptOut(Strict):
    """Retroactive robots.txt opt-out: a domain that disallows any of `agents` in any snapshot is excluded."""
    snapshots: str  # folder of robots.txt snapshots, one sub-folder per date (see curation.steps.compliance.optout)
    agents: list[str] | None = None  # default: curation.steps.compliance.optout.DEFAULT_AGENTS
    # which snapshots govern a URL: its exact host (and www.), its registrable domain (Public Suffix List),
    # or both (the default: an opt-out at example.com covers shop.example.com); see the optout module
    match: Literal["host", "registrable_domain", "both"] = "both"


def missing_licence(name: object) -> str:
    return (f"source {name!r} declares no licence; add `license:` with its SPDX id or expression "
            f"(`CC-BY-4.0`, `MIT OR Apache-2.0`), a licence URL or the licence text. Without one nothing "
            f"can be decided, so `curate` refuses to guess (`license: unknown` is excluded unless "
            f"licence_policy.admit_unknown is true)")
