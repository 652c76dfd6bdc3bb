"""Licence classes and the recipe's licence policy (Apertus 1.5 §3.1.1).

A licence is an SPDX id or free text; `licence_class` maps it to one of LICENCE_CLASSES. SPDX ids are
looked up exactly (case-insensitive); free text is matched on the markers that decide the class, the
most restrictive first (a "CC BY-NC-SA" text is non-commercial before it is share-alike; "CC BY-ND"
is no-derivatives, not permissive: training makes a derivative). Anything
unrecognised is `unknown`, which the policy treats as a class of its own: exclude it explicitly.
"""
from __future__ import annotations

import re

from curation.core.record import Drop, Record
from curation.steps.base import Filter

LICENCE_CLASSES = ("permissive", "share-alike", "no-derivatives", "non-commercial", "research-only", "unknown")
DEFAULT_EXCLUDED = ("non-commercial", "research-only", "share-alike", "no-derivatives")

_SPDX = {
    "permissive": ["MIT", "Apache-2.0", "BSD-2-Clause", "BSD-3-Clause", "ISC", "Zlib", "Unlicense", "CC0-1.0",
                   "CC-BY-1.0", "CC-BY-2.0", "CC-BY-2.5", "CC-BY-3.0", "CC-BY-4.0", "ODC-By-1.0", "PDDL-1.0",
                   "Python-2.0", "BSL-1.0", "PSF-2.0", "MIT-0", "0BSD", "CDLA-Permissive-1.0",
                   "CDLA-Permissive-2.0", "OFL-1.1", "public-domain"],
    "share-alike": ["CC-BY-SA-1.0", "CC-BY-SA-2.0", "CC-BY-SA-2.5", "CC-BY-SA-3.0", "CC-BY-SA-4.0", "ODbL-1.0",
                    "GPL-2.0-only", "GPL-2.0-or-later", "GPL-3.0-only", "GPL-3.0-or-later", "LGPL-2.1-only",
                    "LGPL-2.1-or-later", "LGPL-3.0-only", "LGPL-3.0-or-later", "AGPL-3.0-only",
                    "AGPL-3.0-or-later", "MPL-2.0", "EPL-2.0", "CDLA-Sharing-1.0", "GFDL-1.3-or-later"],
    "no-derivatives": ["CC-BY-ND-1.0", "CC-BY-ND-2.0", "CC-BY-ND-2.5", "CC-BY-ND-3.0", "CC-BY-ND-4.0"],
    "non-commercial": ["CC-BY-NC-1.0", "CC-BY-NC-2.0", "CC-BY-NC-2.5", "CC-BY-NC-3.0", "CC-BY-NC-4.0",
                       "CC-BY-NC-SA-2.0", "CC-BY-NC-SA-3.0", "CC-BY-NC-SA-4.0", "CC-BY-NC-ND-3.0",
                       "CC-BY-NC-ND-4.0"],
}
_BY_SPDX = {spdx.lower(): cls for cls, ids in _SPDX.items() for spdx in ids}
_TEXT = [  # (class, marker) in order of precedence
    ("research-only", re.compile(r"research[- ]only|academic[- ]use|non[- ]?commercial research|research purposes")),
    ("non-commercial", re.compile(r"\bnc\b|non[- ]?commercial|no commercial")),
    ("no-derivatives", re.compile(r"\bnd\b|no[- ]?deriv")),
    ("share-alike", re.compile(r"\bsa\b|share[- ]?alike|\b[al]?gpl\b|copyleft|odbl")),
    ("permissive", re.compile(r"\bmit\b|apache|\bbsd\b|cc[- ]?0|public domain|\bpd\b|cc[- ]?by\b|odc[- ]?by"
                              r"|unlicense|permissive")),
]


def licence_class(licence: str | None) -> str:
    if not licence or not licence.strip():
        return "unknown"
    text = licence.strip()
    if text.lower() in _BY_SPDX:
        return _BY_SPDX[text.lower()]
    lowered = text.lower().replace("_", " ")
    for cls, marker in _TEXT:
        if marker.search(lowered):
            return cls
    return "unknown"


class LicencePolicy(Filter):
    """Drops records whose licence class the recipe excludes: the source's class, or the record's own
    licence field when the source names one (`licence_field`), which then takes precedence."""
    name = "licence"

    def __init__(self, source_class: str, excluded: list[str], field: str | None = None, **kw):
        super().__init__(**kw)
        self.source_class = source_class
        self.excluded = frozenset(excluded)
        self.field = field

    def keep(self, record: Record) -> bool | Drop:
        cls = self.source_class
        if self.field is not None and isinstance(value := record.meta.get(self.field), str) and value.strip():
            cls = licence_class(value)
        return Drop(f"licence_{cls}") if cls in self.excluded else True


class ApprovedConstituents(Filter):
    """A composite collection keeps only its approved constituents (reason `constituent_not_approved`)."""
    name = "constituents"

    def __init__(self, field: str, approved: list[str], **kw):
        super().__init__(**kw)
        self.field = field
        self.approved = frozenset(approved)

    def keep(self, record: Record) -> bool | Drop:
        return True if record.meta.get(self.field) in self.approved else Drop("constituent_not_approved")
