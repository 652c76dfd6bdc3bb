"""A licence string to a licence class, failing closed: what no rule recognises is `unknown`.

Classes, least restrictive first (`LICENCE_CLASSES`, the recipe's `LicenceClass`): permissive,
share-alike, no-derivatives, non-commercial, research-only, unknown, all-rights-reserved. "Most
restrictive" means latest in that order. `all-rights-reserved` ranks above `unknown`: an unknown
licence may grant anything or nothing, "All rights reserved" certainly grants nothing.

A string is read in this order:
1. An SPDX expression (`MIT`, `GPL-2.0+`, `GPL-2.0-only WITH Classpath-exception-2.0`, `(MIT OR
   GPL-3.0-only) AND CC-BY-SA-4.0`), parsed by license-expression, which also resolves aliases
   and deprecated ids. `A AND B` is the most restrictive of A and B (both apply); `A OR B` the least
   restrictive (the licensee may choose either, so the data may be used under the better one); `A WITH
   exception` is A's class (exceptions add permissions to code linking, not to the data). An id is
   classed by the rules below; otherwise by ScanCode's category for it (shipped with
   license-expression): Permissive and Public Domain → permissive, Copyleft and Copyleft Limited →
   share-alike, Commercial → all-rights-reserved, the rest (source-available, free-restricted,
   proprietary-free, ...) → unknown. An expression with an id nobody knows (`MIT AND Foo-1.0`)
   has an unknown leaf; strings that are not expressions go on to 2.
2. Free text, URLs, Hugging Face card ids (`cc-by-nc-4.0`, `openrail`), Common Crawl licence tags
   (`cc_by_nc_sa_3_0_es`) and C5 abbreviations (`by-nc-sa`): every licence mark found counts and the
   most restrictive decides (a text naming two licences is read as both applying). Creative Commons
   marks (BY, SA, ND, NC, CC0, public domain mark; any version or port) are read only where the text
   is about Creative Commons. Copyleft licences (GPL, LGPL, AGPL, MPL, EPL, EUPL, CDDL, GFDL, ODbL,
   OFL) are share-alike: their terms follow derived works, and Apertus 1.5 §3.1.1 excludes share-alike
   subsets. References to terms of use, additional restrictions or use policies (RAIL, Llama) are
   `unknown`: the grant depends on terms nobody here has read. A bare copyright notice ("Copyright
   2021 Met Office", "© Reuters") with no licence mark is all-rights-reserved.
"""
from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass
from functools import lru_cache
from typing import get_args

from curation.recipe.schema import LicenceClass

LICENCE_CLASSES: tuple[str, ...] = get_args(LicenceClass)
RANK = {c: i for i, c in enumerate(LICENCE_CLASSES)}
_SHOWN = 200  # characters of a licence string kept in a verdict's description
MAX_TEXT = 65536  # longer licence strings are unknown


@dataclass(frozen=True)
class Verdict:
    """A licence class, the licence string it was read from, and the mark that decided it."""
    cls: str
    text: str
    mark: str

    def describe(self, where: str = "") -> str:
        shown = self.text if len(self.text) <= _SHOWN else self.text[:_SHOWN] + "…"
        out = f"{where}: {shown}" if where else shown
        return out if self.mark.lower() == self.text.lower() else f"{out} [{self.mark}]"


def most_restrictive(verdicts: list[Verdict]) -> Verdict:
    return max(verdicts, key=lambda v: RANK[v.cls])  # the first of equals: deterministic in input order


def least_restrictive(verdicts: list[Verdict]) -> Verdict:
    return min(verdicts, key=lambda v: RANK[v.cls])


def _r(pattern: str) -> re.Pattern:
    """A pattern in which " ?" is optional and " " required whitespace or hyphens."""
    return re.compile(pattern.replace(" ?", r"[\s-]*").replace(" ", r"[\s-]+"))


# (class, mark) in the order they are reported when several of one class match
_MARKS: list[tuple[str, re.Pattern]] = [(cls, _r(p)) for cls, p in [
    ("all-rights-reserved", (r"all rights reserved|alle rechte vorbehalten|tous droits r[ée]serv[ée]s"
                             r"|todos los derechos reservados|tutti i diritti riservati|alle rechten voorbehouden")),
    ("all-rights-reserved", r"\bproprietary\b"),
    ("all-rights-reserved", r"\bconfidential\b"),
    ("all-rights-reserved", r"\bnot licen[cs]ed\b|\bunlicen[cs]ed\b|\bno licen[cs]e (?:is )?(?:granted|given)"),
    ("all-rights-reserved", (r"(?:reproduction|redistribution|copying|re-?use|distribution) (?:is |are )?"
                             r"(?:strictly )?(?:prohibited|forbidden|not permitted)")),
    ("all-rights-reserved", r"(?:may|must|shall|can)\s*not be (?:reproduced|copied|redistributed|republished)"),
    ("all-rights-reserved", r"without (?:the )?(?:prior )?(?:express )?written (?:permission|consent)"),
    ("all-rights-reserved", r"not (?:in )?(?:the )?public domain"),
    ("all-rights-reserved", r"\bcommercial licen[cs]e"),
    ("all-rights-reserved", r"rightsstatements\.org/vocab/inc(?!-nc|-edu)\b"),
    ("unknown", r"terms (?:of|and conditions of) (?:use|service)|terms and conditions|\btos\b|\beula\b"),
    ("unknown", r"subject to (?:the |our |its |additional |separate )?(?:terms|conditions|restrictions|agreement)"),
    ("unknown", r"additional (?:terms|restrictions|conditions)|acceptable use polic"),
    ("unknown", r"\bopen-?rail|\brail\b|responsible ai licen|\bllama\s*\d|\bgemma\b|community licen[cs]e"),
    ("research-only", (r"\b(?:research|academic|scientific|educational|evaluation|research and educational) "
                       r"(?:use |purposes? )?only\b")),
    ("research-only", r"\bonly for (?:non ?commercial )?(?:research|academic|scientific|educational|evaluation)"),
    ("research-only", r"\bacademic (?:use|purposes?|research)|non ?commercial research"),
    ("research-only", r"\bresearch (?:licen[cs]e|agreement)"),
    ("research-only", r"\bfor evaluation\b|rightsstatements\.org/vocab/inc-edu"),
    ("non-commercial", (r"non ?commercial|\bnot for (?:any )?commercial|\bno commercial|nicht ?kommerziell"
                        r"|pas d'utilisation commerciale|\bno comercial")),
    ("non-commercial", (r"commercial (?:use|usage|purposes?|exploitation|redistribution|distribution)s? (?:is |are )?"
                        r"(?:strictly )?(?:not (?:permitted|allowed)|prohibited|forbidden)")),
    ("non-commercial", r"(?:may|must|shall|can)\s*not be used (?:for |in )?(?:any )?commercial"),
    ("non-commercial", r"\b(?:personal|private) (?:and non ?commercial )?use only|\bfor personal use"),
    ("non-commercial", r"rightsstatements\.org/vocab/(?:noc|inc)-nc"),
    ("no-derivatives", r"\bno ?deriv|noderiv|(?:may|must|shall|can)\s*not be (?:modified|altered|adapted)"),
    ("no-derivatives", r"\bno (?:modifications?|adaptations?)\b"),
    ("share-alike", r"share ?alike|\bcopyleft"),
    ("share-alike", r"\b[al]?gpl|gnu (?:lesser |library |affero )?general public|gnu free documentation|\bg?fdl\b"),
    ("share-alike", r"\bmpl\b|mozilla public|\bepl\b|eclipse public|\beupl\b|european union public|\bcddl\b"),
    ("share-alike", r"\bodbl\b|open database licen|cdla sharing|\bosl\b|open software licen|\bofl\b|open font"),
    ("share-alike", r"\bcecill\b(?! ?b\b)"),
    ("permissive", r"\bmit\b(?! press| university| institute|'s)|\bexpat\b|\bapache\b|\basl ?2"),
    ("permissive", r"\bbsd\b|\b[0-4] ?clause\b|\bisc\b|\bzlib\b"),
    ("permissive", r"\bunlicense\b|\bwtfpl\b|\bbsl-1|boost software|\bpsf\b|python software foundation|\bx11\b"),
    ("permissive", r"public ?domain|\bcc ?(?:0|zero)\b|\bpddl\b|\bodc ?by\b|open data commons attribution"),
    ("permissive", r"cdla permissive|open government licen[cs]e|licence ouverte|\betalab|datenlizenz"),
    ("permissive", r"permission is hereby granted, free of charge|redistribution and use in source and binary"),
]]
# Creative Commons elements, read only where the text is about Creative Commons
_CC_CONTEXT = re.compile(r"\bcc\b|\bcc[\s-]?(?:by|0|zero)\b|creative\s?commons|creativecommons|publicdomain")
_CC_MARKS: list[tuple[str, re.Pattern]] = [(cls, _r(p)) for cls, p in [
    ("non-commercial", r"\bnc\b"),
    ("no-derivatives", r"\bnd\b|no ?derivs?\b"),
    ("share-alike", r"\bsa\b"),
    ("permissive", r"\bcc[\s(-]*by\b|\bby ?\d|licenses/by/|\battribution\b|publicdomain|\bpd ?mark\b|\bcc[\s(-]*0"),
]]
_C5_ABBR = re.compile(r"^(?:by(?:-(?:nc|nd|sa))*|zero|mark)$")  # BramVanroy/CommonCrawl-CreativeCommons
_NOTICE = re.compile(r"©|\(c\)\s*\d{4}|\bcopyright\b")
_SOME_RIGHTS = re.compile(r"some rights reserved")
_SPDX_OPERATOR = re.compile(r"\s(?:AND|OR|WITH)\s")

# Identifiers that are no SPDX id: Hugging Face card ids and bare words seen in licence fields
_IDS = {
    "permissive": ["public-domain", "publicdomain", "pd", "cc0", "odc-by", "pddl", "odc-pddl", "apache", "mit-license"],
    "share-alike": ["gpl", "lgpl", "agpl", "gfdl", "odbl", "odc-odbl", "cc-by-sa"],
    "non-commercial": ["cc-by-nc", "cc-by-nc-sa", "cc-by-nc-nd"],
    "no-derivatives": ["cc-by-nd"],
    "research-only": ["h-research", "intel-research", "apple-amlr", "deepfloyd-if-license",
                      "fair-noncommercial-research-license"],
    "unknown": ["cc", "cc-unknown", "other", "unknown", "noassertion", "none", "certification", "apple-ascl",
                "c-uda", "llama2", "llama3", "llama3.1", "llama3.2", "llama3.3", "llama4", "gemma"],
    "all-rights-reserved": ["proprietary", "all-rights-reserved", "copyright", "copyrighted"],
}
_BY_ID = {i: cls for cls, ids in _IDS.items() for i in ids}
_SCANCODE = {"Permissive": "permissive", "Public Domain": "permissive", "Copyleft": "share-alike",
             "Copyleft Limited": "share-alike", "Commercial": "all-rights-reserved"}


def _normal(text: str) -> str:
    text = unicodedata.normalize("NFKC", text).lower().replace("_", " ")
    return re.sub(r"\s+", " ", text).strip()


def _cc(text: str, original: str) -> list[Verdict]:
    return [Verdict(cls, original, m.group(0)) for cls, rx in _CC_MARKS if (m := rx.search(text))]


def free_text(original: str) -> Verdict:
    """Class of a text by the licence marks in it (see the module docstring, rule 2)."""
    text = _SOME_RIGHTS.sub(" ", _normal(original))
    found = [Verdict(cls, original, m.group(0)) for cls, rx in _MARKS if (m := rx.search(text))]
    if _C5_ABBR.match(text):  # a bare C5 abbreviation: BY (and CC0, the mark) grant use, NC/ND/SA restrict it
        found += [Verdict("permissive", original, f"cc {text}"), *_cc(text, original)]
    elif _CC_CONTEXT.search(text):
        found += _cc(text, original)
    if found:
        return most_restrictive(found)
    if m := _NOTICE.search(text):
        return Verdict("all-rights-reserved", original, f"{m.group(0)} notice, no licence granted")
    return Verdict("unknown", original, "no licence mark recognised")


@lru_cache(maxsize=1)
def _spdx():
    from license_expression import get_license_index, get_spdx_licensing
    categories = {}
    for entry in get_license_index():
        for key in [entry.get("spdx_license_key"), *(entry.get("other_spdx_license_keys") or [])]:
            if key:
                categories[key.lower()] = entry.get("category")
    return get_spdx_licensing(), categories


def _leaf(key: str) -> Verdict:
    low = key.lower()
    if low in _BY_ID:
        return Verdict(_BY_ID[low], key, key)
    if low.startswith(("cc-", "cc0")):  # versions and ports: CC-BY-NC-SA-2.0-UK, CC-BY-SA-3.0-DE, CC-PDDC
        v = free_text(key)
        return Verdict(v.cls, key, v.mark if v.cls == "unknown" else key)
    category = _spdx()[1].get(low)
    if category is not None:
        return Verdict(_SCANCODE.get(category, "unknown"), key, key if category in _SCANCODE else
                       f"{key}: {category.lower()} licence")
    if low.startswith(("licenseref-", "documentref-")):
        return Verdict("unknown", key, "custom licence reference")
    return free_text(key)


def _evaluate(node) -> Verdict:
    from license_expression import AND, OR, LicenseWithExceptionSymbol
    if isinstance(node, LicenseWithExceptionSymbol):
        return _leaf(node.license_symbol.key)
    if isinstance(node, AND):
        return most_restrictive([_evaluate(a) for a in node.args])
    if isinstance(node, OR):
        return least_restrictive([_evaluate(a) for a in node.args])
    return _leaf(node.key)


def _expression(text: str):
    """The parsed SPDX expression, or None when `text` is not one."""
    from license_expression import ExpressionError
    licensing = _spdx()[0]
    try:
        expr = licensing.parse(text, validate=False)
    except (ExpressionError, TypeError, ValueError):
        return None
    if expr is None:
        return None
    unknown = licensing.unknown_license_keys(expr)
    if not unknown:
        return expr
    # with SPDX's own operators, an unknown single-token id is an unknown leaf, not free text
    if _SPDX_OPERATOR.search(text) and all(" " not in k for k in unknown) and len(licensing.license_symbols(expr)) > 1:
        return expr
    return None


def classify(text: str) -> Verdict:
    """The class of one licence string, the string and what decided it (short strings, the ones that
    repeat across records, are remembered; long ones are not, so hostile input cannot fill memory)."""
    return _classify_cached(text) if isinstance(text, str) and len(text) <= 1000 else _classify(text)


@lru_cache(maxsize=16384)
def _classify_cached(text: str) -> Verdict:
    return _classify(text)


def _classify(text: str) -> Verdict:
    if not isinstance(text, str) or not text.strip():
        return Verdict("unknown", str(text), "empty licence")
    if len(text) > MAX_TEXT:  # a whole GPL-3.0 is 35 KB; reading part of a text could miss its restriction
        return Verdict("unknown", text, f"licence text longer than {MAX_TEXT:,} characters, not read")
    stripped = text.strip()
    if stripped.lower() in _BY_ID:
        return Verdict(_BY_ID[stripped.lower()], stripped, stripped)
    expr = _expression(stripped) if len(stripped) <= 500 else None
    if expr is not None:
        verdict = _evaluate(expr)
        return Verdict(verdict.cls, stripped, verdict.mark)
    return free_text(stripped)


def licence_class(text: str | None) -> str:
    """The class of a licence string (`unknown` for None or what no rule recognises)."""
    return classify(text).cls if isinstance(text, str) else "unknown"
