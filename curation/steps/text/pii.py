"""PII redaction: e-mail and IP addresses (datatrove's PIIFormatter machinery), IBANs and phone numbers.

`redact(text, kinds)` rewrites the text and returns it with a `Counter` of replacements per kind;
`PIIRedactor` is the step around it (records are rewritten, never dropped). Kinds run in the
fixed order email, ip, iban, phone, each on the output of the previous one.

- **email**: datatrove's e-mail regex, unchanged.
- **ip**: datatrove's IPv4 regex and `public_ip_validator`: with `only_public_ips` (the default,
  as in datatrove) only `is_global` addresses are replaced, so private, loopback, link-local,
  shared (100.64/10) and reserved ranges such as 192.168.0.1 are kept. Two changes: the IPv4
  regex is anchored so it cannot start or end inside a longer number or dotted token (datatrove
  would rewrite `1.2.3.4` inside `11.2.3.45`), and IPv6 is added (datatrove has IPv4 only): a
  candidate with at least two colons and a digit, parsed by `ipaddress`, replaced when
  `is_global` and, for IPv6, also not reserved or multicast (only 2000::/3 remains in practice,
  so `1::2` in a slice or `a::b` in code is kept).
- **iban**: two letters, two check digits, 11-30 letters/digits (upper case), either compact or
  in the printed groups of four separated by single spaces; replaced only when the ISO 13616
  mod-97 checksum holds (and the check digits are 02-98).
- **phone**: see `_phone_ok`; in short: at least 8 and at most 15 digits, and one of
  (a) an international `+CC` form, compact or grouped; (b) a national form whose first group is
  a trunk/access prefix starting with 0 (`044 668 18 00`, `(044) 668 18 00`, `0041 44 668 18 00`),
  with at least one separator; (c) the NANP form `202-555-0143` / `(202) 555-0143`.
  Separators are one space, hyphen or no-break space, or parentheses around a group; dots and
  slashes are not, so IPs, versions and dotted dates never match. Date shapes (`01-02-2024`),
  runs without separators (`123456789012`), years, and numbers that continue into a longer
  token are kept. ISBNs are never phones: ISBN-13 has no phone shape (no `+`, no leading 0,
  not 3-3-4) and any number right after the word `ISBN` is kept (ISBN-10 can start with 0).
"""
from __future__ import annotations

import ipaddress
import re
from collections import Counter
from functools import lru_cache, partial
from typing import ClassVar

import pyarrow as pa
from datatrove.pipeline.formatters.pii import (
    PIIFormatter,
    PIIReplacer,
    public_ip_validator,
)

from curation.core.record import Drop, Record
from curation.errors import RecipeError
from curation.steps.base import Step

KINDS = ("email", "ip", "iban", "phone")

DEFAULT_EMAIL = "email@example.com"
DEFAULT_IP = "22.214.171.124"  # the first of datatrove's replacement IPs
DEFAULT_IBAN = "<IBAN>"
DEFAULT_PHONE = "<PHONE>"


class _CountingReplacer(PIIReplacer):
    """datatrove's `PIIReplacer`, counting replacements; the replacement cycle restarts on every
    call so that a text's output never depends on the texts redacted before it."""

    def replace_count(self, text: str) -> tuple[str, int]:
        self._replace_i = 0
        n = 0

        def get_replacement(m: re.Match) -> str:
            nonlocal n
            if self.validator and not self.validator(m.group(0)):
                return m.group(0)
            n += 1
            replacement = self.replacements[self._replace_i]
            self._replace_i = (self._replace_i + 1) % len(self.replacements)
            return replacement

        return self.regex.sub(get_replacement, text), n


# --- IP ---------------------------------------------------------------------------------------
# IPv4: datatrove's pattern, not starting after a word char or dot, not ending before one
# (a sentence-final dot is fine).
_V4_LEFT = r"(?<![\w.])"
_V4_RIGHT = r"(?!\w|\.\w)"
# IPv6: hex groups and colons (2..39 chars, at least two colons), optionally an embedded IPv4 tail.
_IPV6 = (r"(?<![\w:.])(?=[0-9A-Fa-f:]*:[0-9A-Fa-f:]*:)(?=[A-Fa-f:]*\d)"
         r"[0-9A-Fa-f:]{2,39}(?:(?<=:)(?:\d{1,3}\.){3}\d{1,3})?(?![\w:]|\.\w)")


def _ipv6_ok(candidate: str, public_only: bool) -> bool:
    if not public_ip_validator(candidate, public_only=public_only):
        return False
    if not public_only:
        return True
    addr = ipaddress.ip_address(candidate)
    return not (addr.is_reserved or addr.is_multicast)


# --- IBAN -------------------------------------------------------------------------------------
_IBAN = re.compile(r"\b[A-Z]{2}\d{2}(?:[A-Z0-9]{11,30}|(?: [A-Z0-9]{4}){2,7}(?: [A-Z0-9]{1,4})?)\b")


def iban_valid(candidate: str) -> bool:
    """ISO 13616: country code, check digits 02-98, 11-30 alphanumerics, mod 97 == 1."""
    s = candidate.replace(" ", "").upper()
    if not re.fullmatch(r"[A-Z]{2}\d{2}[A-Z0-9]{11,30}", s) or not 2 <= int(s[2:4]) <= 98:
        return False
    digits = "".join(str(int(c, 36)) for c in s[4:] + s[:4])
    return int(digits) % 97 == 1


def _redact_iban(text: str, replacement: str) -> tuple[str, int]:
    n = 0

    def sub(m: re.Match) -> str:
        nonlocal n
        cand = m.group(0)
        # A spaced IBAN may have swallowed a following short upper-case word ("... 00 BIC"):
        # drop trailing groups until the checksum holds.
        while True:
            if iban_valid(cand):
                n += 1
                return replacement + m.group(0)[len(cand):]
            if " " not in cand:
                return m.group(0)
            cand = cand.rsplit(" ", 1)[0]

    return _IBAN.sub(sub, text), n


# --- phone ------------------------------------------------------------------------------------
_GROUP = r"(?:\(\d+\)|\d+)"
_SEP = r"(?:[ \-\u00a0]|(?<=\))|(?=\())"
_PHONE = re.compile(
    r"(?<![\w+\-/])(?<!\d[.,:])(?<!\d[ \-\u00a0])(?<!\d\))"  # not inside a longer number or token
    rf"\+?{_GROUP}(?:{_SEP}{_GROUP})*"
)
_ISBN_BEFORE = re.compile(r"ISBN(?:-?1[03])?:?\s*$", re.IGNORECASE)


def _is_date_shape(groups: list[str]) -> bool:
    lens = [len(g) for g in groups]
    return len(lens) == 3 and (lens[0] <= 2 and lens[1] <= 2 and lens[2] == 4
                               or lens[0] == 4 and lens[1] <= 2 and lens[2] <= 2)


def _phone_ok(text: str, m: re.Match) -> bool:
    """The phone rule (conservative, see the module docstring)."""
    cand = m.group(0)
    end = m.end()
    # must not run on into a longer token: "0-8044-2957-X", "044 668 18 00.5"
    if end < len(text) and (text[end].isalnum() or text[end] == "_"
                            or (text[end] in ".,:/-" and end + 1 < len(text) and text[end + 1].isalnum())):
        return False
    if _ISBN_BEFORE.search(text, max(0, m.start() - 24), m.start()):  # a window: no rescan of the text
        return False
    groups = re.findall(r"\d+", cand)
    digits = "".join(groups)
    if not 8 <= len(digits) <= 15:
        return False
    if cand.startswith("+"):
        return not _is_date_shape(groups)
    if len(groups) < 2 or _is_date_shape(groups):
        return False  # national forms need a separator
    if groups[0].startswith("0"):
        # trunk (0..) or access (00..) prefix of 2-5 digits, then groups of at least two digits
        return 2 <= len(groups[0]) <= 5 and all(len(g) >= 2 for g in groups[1:])
    # NANP: (NXX) NXX-XXXX or NXX-NXX-XXXX
    return bool(re.fullmatch(r"(?:\([2-9]\d\d\) ?|[2-9]\d\d[ \-])[2-9]\d\d[ \-]\d{4}", cand))


def _redact_phone(text: str, replacement: str) -> tuple[str, int]:
    n = 0

    def sub(m: re.Match) -> str:
        nonlocal n
        if _phone_ok(m.string, m):
            n += 1
            return replacement
        return m.group(0)

    return _PHONE.sub(sub, text), n


# --- the redactor -----------------------------------------------------------------------------
def _as_tuple(r: str | tuple[str, ...]) -> tuple[str, ...]:
    return (r,) if isinstance(r, str) else tuple(r)


@lru_cache(maxsize=16)
def _replacers(email_replacement: tuple[str, ...], ip_replacement: tuple[str, ...], only_public_ips: bool):
    fmt = PIIFormatter(email_replacement=email_replacement, ip_replacement=ip_replacement,
                       only_remove_public_ips=only_public_ips)
    email = _CountingReplacer(fmt.emails_replacer.regex.pattern, fmt.emails_replacer.replacements)
    ipv4 = _CountingReplacer(_V4_LEFT + fmt.ip_replacer.regex.pattern + _V4_RIGHT, fmt.ip_replacer.replacements,
                             fmt.ip_replacer.validator)
    ipv6 = _CountingReplacer(_IPV6, fmt.ip_replacer.replacements, partial(_ipv6_ok, public_only=only_public_ips))
    return email, ipv4, ipv6


def _check_kinds(kinds) -> tuple[str, ...]:
    kinds = (kinds,) if isinstance(kinds, str) else tuple(kinds)
    unknown = [k for k in kinds if k not in KINDS]
    if unknown:
        raise RecipeError(f"pii: unknown kind(s) {unknown}; choose from {list(KINDS)}")
    return kinds


def redact(text: str, kinds=KINDS, *, email_replacement: str | tuple[str, ...] = DEFAULT_EMAIL,
           ip_replacement: str | tuple[str, ...] = DEFAULT_IP, iban_replacement: str = DEFAULT_IBAN,
           phone_replacement: str = DEFAULT_PHONE, only_public_ips: bool = True) -> tuple[str, Counter]:
    """Replace the PII `kinds` in `text`; returns the new text and a Counter kind -> replacements
    (kinds with no replacement are absent). Deterministic: tuple replacements cycle per call."""
    kinds = _check_kinds(kinds)
    counts: Counter = Counter()
    email, ipv4, ipv6 = _replacers(_as_tuple(email_replacement), _as_tuple(ip_replacement), only_public_ips)
    if "email" in kinds:
        text, counts["email"] = email.replace_count(text)
    if "ip" in kinds:
        text, n4 = ipv4.replace_count(text)
        text, n6 = ipv6.replace_count(text)
        counts["ip"] = n4 + n6
    if "iban" in kinds:
        text, counts["iban"] = _redact_iban(text, iban_replacement)
    if "phone" in kinds:
        text, counts["phone"] = _redact_phone(text, phone_replacement)
    return text, +counts


class PIIRedactor(Step):
    """Rewrites e-mails, public IPs, valid IBANs and phone numbers; never drops a record.

    `self.replaced` counts replacements per kind over all records (it is `self.stats.notes`
    where StepStats has that field); a record with at least one replacement gets
    `meta["pii"] = {kind: count}`.
    """
    name = "pii"

    def __init__(self, *, kinds=KINDS, email_replacement: str | tuple[str, ...] = DEFAULT_EMAIL,
                 ip_replacement: str | tuple[str, ...] = DEFAULT_IP, iban_replacement: str = DEFAULT_IBAN,
                 phone_replacement: str = DEFAULT_PHONE, only_public_ips: bool = True, **kw):
        super().__init__(**kw)
        self.kinds = _check_kinds(kinds)
        self._options = dict(email_replacement=email_replacement, ip_replacement=ip_replacement,
                             iban_replacement=iban_replacement, phone_replacement=phone_replacement,
                             only_public_ips=only_public_ips)
        # the same Counter as `stats.notes` where the base has it, so the ledger records it too
        self.replaced: Counter = self.stats.notes

    def process(self, record: Record) -> Record | Drop:
        text, counts = redact(record.text, self.kinds, **self._options)
        if counts:
            record.text = text
            record.meta["pii"] = dict(sorted(counts.items()))
            self.replaced.update(counts)
        return record

    # the ledger table this step contributes: replacements per kind and source
    ledger_tables: ClassVar[dict[str, pa.Schema]] = {"pii": pa.schema([("run", pa.string()), ("source", pa.string()), ("kind", pa.string()),
                                       ("replaced", pa.int64())])}

    @staticmethod
    def ledger_rows(run: str, source: str, stats) -> dict[str, list[dict]]:
        return {"pii": [{"run": run, "source": source, "kind": k, "replaced": n} for k, n in sorted(stats.notes.items())]}
