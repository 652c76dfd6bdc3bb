"""The recipe's licence policy (Apertus 1.5 §3.1.1), applied per source or per record; it fails closed.

A source's class comes from its `license` (or `license_class`), see `licence_text`. With a
`licence_field`, each record that has the field is decided by its own licences instead (see
`licence_fields` for the shapes read): a record is dropped when any licence it carries is of an
excluded class (reason `licence_<class>` of the most restrictive excluded one), and kept otherwise.
The decision and the licence that made it are written into the record's metadata as
`licence_class` and `licence_decided_by` (e.g. `cc_license_spans: cc_re__cc_re__cc_by_nc_sa_3_0 [nc]`),
so kept records carry their provenance and a decisions table can show what removed the others.
A record without the field (or with null in it) keeps the source's class, decided by `source`.
"""
from __future__ import annotations

from curation.core.record import Drop, Record
from curation.steps.base import Filter
from curation.steps.compliance.licence_fields import ABSENT, field_value, licences_in
from curation.steps.compliance.licence_text import (
    LICENCE_CLASSES,
    RANK,
    Verdict,
    classify,
    licence_class,
)

__all__ = ["DEFAULT_EXCLUDED", "LICENCE_CLASSES", "UNKNOWN_ADMITTED", "ApprovedConstituents", "LicencePolicy",
           "Verdict", "admits_unknown", "classify", "decide", "licence_class", "licence_decision"]

# what the recipe excludes by default (the schema's LicencePolicy adds unknown and all-rights-reserved)
DEFAULT_EXCLUDED = ("non-commercial", "research-only", "share-alike", "no-derivatives", "unknown",
                    "all-rights-reserved")
UNKNOWN_ADMITTED = "UNKNOWN LICENCES ADMITTED (licence_policy.admit_unknown)"


def decide(found: list[tuple[str, Verdict]], excluded: frozenset[str]) -> tuple[str, str]:
    """(class, decided_by) of a record carrying the licences `found`: the most restrictive excluded one
    when any is excluded, else the most restrictive of all."""
    pool = [f for f in found if f[1].cls in excluded] or found
    where, verdict = max(pool, key=lambda f: RANK[f[1].cls])
    return verdict.cls, verdict.describe(where)


class LicencePolicy(Filter):
    """Drops records whose licence class the recipe excludes: the source's class, or the record's own
    licences when the source names a `licence_field` (see the module docstring)."""
    name = "licence"

    def __init__(self, source_class: str, excluded: list[str], field: str | None = None, **kw):
        super().__init__(**kw)
        if source_class not in RANK:
            raise ValueError(f"licence class {source_class!r} is not one of {LICENCE_CLASSES}")
        self.source_class = source_class
        self.excluded = frozenset(excluded)
        self.field = field

    def keep(self, record: Record) -> bool | Drop:
        cls = self.source_class
        if self.field is not None:
            value = field_value(record.meta, self.field)
            if value is ABSENT:
                decided_by = "source"
            else:
                cls, decided_by = decide(licences_in(value, self.field), self.excluded)
            record.meta["licence_class"] = cls
            record.meta["licence_decided_by"] = decided_by
        else:
            decided_by = "source"
        return Drop(f"licence_{cls}", decided_by) if cls in self.excluded else True


def licence_decision(licence: dict) -> str:
    """The sources table's `licence_decision` for the plan's licence spec (`class`, `exclude`, `field`).
    When the policy admits unknown licences the text ends with UNKNOWN_ADMITTED, for the report to flag."""
    cls, excluded = licence["class"], set(licence["exclude"])
    if licence["field"]:
        text = (f"per record ({licence['field']}: the most restrictive licence present; records without "
                f"it: source class {cls})")
    else:
        text = f"excluded ({cls})" if cls in excluded else "included"
    return f"{text}; {UNKNOWN_ADMITTED}" if "unknown" not in excluded else text


def admits_unknown(licence: dict) -> bool:
    return "unknown" not in licence["exclude"]


class ApprovedConstituents(Filter):
    """A composite collection keeps only its approved constituents (reason `constituent_not_approved`)."""
    name = "constituents"

    def __init__(self, field: str, approved: list[str], **kw):
        super().__init__(**kw)
        self.field = field
        self.approved = frozenset(approved)

    def keep(self, record: Record) -> bool | Drop:
        return True if record.meta.get(self.field) in self.approved else Drop("constituent_not_approved")
