"""Threat feeds read for what they are, or refused (Apertus 1.5 §6.4: the incident to prevent is a
blocklist that silently protects nothing).

Formats (`network.feeds[].format`; the default `auto` sniffs the content and says what it found):

| format          | lines                                                      | entries                  |
|-----------------|------------------------------------------------------------|--------------------------|
| `netset`        | FireHOL ip/netsets, Spamhaus DROP text, IPsum (`ip count`) | networks                 |
| `spamhaus_json` | Spamhaus DROP JSON lines (`{"cidr": ...}`)                 | networks                 |
| `hosts`         | `0.0.0.0 host`, `127.0.0.1 host`, `:: host`, bare names     | hosts (IPs: networks)    |
| `domains`       | one name per line, `*.name`, `.name`                       | hosts (IPs: networks)    |
| `adblock`       | AdBlock Plus / uBlock Origin / AdGuard filter lists        | hosts, URL prefixes      |
| `unbound`       | `local-zone: "host." always_nxdomain`, `local-data:`       | hosts                    |
| `rpz`           | Response Policy Zone files (`host CNAME .`, `rpz-ip`)      | hosts, networks          |
| `dnsmasq`       | `address=/host/0.0.0.0`, `local=/host/`, `server=/host/`   | hosts                    |
| `urlhaus`       | one URL per line                                           | hosts (https), prefixes  |
| `urlhaus_csv`   | URLhaus CSV dumps (`url` column) and host/path lookups     | hosts, URL prefixes      |

`firehol` is `netset`; `spamhaus` is `netset`, or `spamhaus_json` when its rules are JSON objects.
Details of each syntax are in `curation.acquire.feed_formats` and `curation.acquire.feed_rules`.

Compression is recognised by magic bytes, never by name: gzip (also multi-member), bzip2 and xz are
decompressed (at most `MAX_FEED_BYTES`), zstd when `zstandard` is installed; a zip is refused. A
UTF-16 BOM is honoured; NUL bytes mean the file is binary and is refused.

Detection (`auto`): every format's parser reads a sample (the first 1,000 lines and 1,000 lines
spread over the rest). A format is a candidate when its reading of the sample passes the
plausibility rule below; the candidates reading the most lines into entries (then: with the fewest
unreadable lines) are the best. The first best in `DETECTION_ORDER` wins when every other best
found the same entries (a list of bare addresses is `netset`, `domains`, `hosts` and `adblock`
alike); best candidates that disagree, or none, are an error naming the feed and each reading.

Plausibility (declared or detected format, on the whole feed), with rule lines = lines that are
neither blank nor comments nor directives of the format: the feed is refused when
1. it yields no entry at all;
2. more than `MAX_UNRECOGNISED_SHARE` (10%) of its rule lines are unreadable in the format;
3. fewer than `min_entry_share` (default 50%) of its rule lines yield an entry (a list of cosmetic
   rules or exceptions protects nothing; a feed may lower its own share).
"""
from __future__ import annotations

import bz2
import codecs
import gzip
import hashlib
import io
import lzma
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field

import pyarrow as pa

from curation.acquire import feed_formats as ff
from curation.acquire import feed_rules as fr
from curation.acquire.feed_formats import UNRECOGNISED, UrlPrefix
from curation.errors import InputError

PARSERS = {"netset": ff.parse_netset, "spamhaus_json": ff.parse_spamhaus_json, "hosts": ff.parse_hosts,
           "domains": ff.parse_domains, "adblock": fr.parse_adblock, "unbound": fr.parse_unbound,
           "rpz": fr.parse_rpz, "dnsmasq": fr.parse_dnsmasq, "urlhaus": ff.parse_urlhaus,
           "urlhaus_csv": ff.parse_urlhaus_csv}
FORMATS = tuple(PARSERS)
ALIASES = ("firehol", "spamhaus")
DETECTION_ORDER = ("spamhaus_json", "rpz", "unbound", "dnsmasq", "netset", "domains", "hosts", "urlhaus",
                   "urlhaus_csv", "adblock")  # on a tie of identical readings, the simpler syntax names it
MIN_ENTRY_SHARE = 0.5
MAX_UNRECOGNISED_SHARE = 0.1
MAX_FEED_BYTES = 1 << 30
_MAGIC = ((b"\x1f\x8b", "gzip"), (b"BZh", "bzip2"), (b"\xfd7zXZ\x00", "xz"), (b"\x28\xb5\x2f\xfd", "zstd"),
          (b"PK\x03\x04", "zip"))


@dataclass
class Entries:
    networks: set = field(default_factory=set)
    hosts: set[str] = field(default_factory=set)
    prefixes: set[UrlPrefix] = field(default_factory=set)
    skipped: Counter = field(default_factory=Counter)  # rule lines that gave no entry, by reason
    rule_lines: int = 0
    entry_lines: int = 0

    @classmethod
    def collect(cls, outcomes: Iterable) -> Entries:
        e = cls()
        for outcome in outcomes:
            if outcome is None:
                continue
            e.rule_lines += 1
            if isinstance(outcome, str):
                e.skipped[outcome] += 1
                continue
            e.entry_lines += 1
            for entry in outcome:
                (e.hosts if isinstance(entry, str) else e.prefixes if isinstance(entry, UrlPrefix)
                 else e.networks).add(entry)
        return e

    def count(self) -> int:
        return len(self.networks) + len(self.hosts) + len(self.prefixes)

    def same(self, other: Entries) -> bool:
        return (self.networks, self.hosts, self.prefixes) == (other.networks, other.hosts, other.prefixes)

    def describe(self) -> str:
        skipped = ", ".join(f"{r} {n}" for r, n in sorted(self.skipped.items()))
        return (f"{len(self.networks)} networks, {len(self.hosts)} hosts, {len(self.prefixes)} URL prefixes "
                f"from {self.entry_lines} of {self.rule_lines} rule lines" + (f" (skipped: {skipped})" if skipped else ""))


def problem(e: Entries, min_entry_share: float = MIN_ENTRY_SHARE) -> str | None:
    """Why a reading is implausible (the rule in the module docstring), or None."""
    if e.count() == 0:
        return "no entries"
    unreadable = e.skipped.get(UNRECOGNISED, 0)
    if unreadable > MAX_UNRECOGNISED_SHARE * e.rule_lines:
        return f"{unreadable} of {e.rule_lines} rule lines unreadable in this format"
    if e.entry_lines < min_entry_share * e.rule_lines:
        return f"only {e.entry_lines} of {e.rule_lines} rule lines block anything (below {min_entry_share:.0%})"
    return None


@dataclass
class Feed:
    name: str                  # how errors and the ledger name it: the recipe's path or URL
    declared: str              # the recipe's `format` (`auto` when detected)
    format: str                # the format it was read as
    compression: str | None    # e.g. "gzip", "gzip+xz"
    sha256: str                # of the bytes as given (compressed)
    bytes: int
    entries: Entries

    def record(self) -> dict:
        """The JSON-able summary kept in `acquired.json` (and read back by `feed_rows`)."""
        e = self.entries
        return {"feed": self.name, "declared_format": self.declared, "format": self.format,
                "compression": self.compression, "sha256": self.sha256, "bytes": self.bytes,
                "rule_lines": e.rule_lines, "networks": len(e.networks), "hosts": len(e.hosts),
                "url_prefixes": len(e.prefixes), "skipped": dict(sorted(e.skipped.items()))}

    def summary(self) -> str:
        how = "detected" if self.declared == "auto" else "declared"
        packed = f", {self.compression}" if self.compression else ""
        return f"threat feed {self.name}: {self.format} ({how}{packed}): {self.entries.describe()}"


def decode(name: str, data: bytes) -> tuple[str, str | None]:
    """Text of a feed and its compression layers (by magic bytes)."""
    layers = []
    while (kind := next((k for magic, k in _MAGIC if data.startswith(magic)), None)) is not None:
        if kind == "zip" or len(layers) == 3:
            raise InputError(f"threat feed {name}: is a {kind} archive{' nested too deep' if kind != 'zip' else ''}; "
                             f"extract the feed file and give its path")
        data = _inflate(name, kind, data)
        layers.append(kind)
    if data.startswith((codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)):
        text = data.decode("utf-16", errors="replace")
    else:
        text = data.decode("utf-8-sig", errors="replace")
    if "\x00" in text:
        raise InputError(f"threat feed {name}: holds binary data (NUL bytes{' after ' + '+'.join(layers) if layers else ''}),"
                         f" not a text feed; check the download")
    return text, "+".join(layers) or None


def _inflate(name: str, kind: str, data: bytes) -> bytes:
    try:
        if kind == "zstd":
            try:
                import zstandard
            except ImportError:
                raise InputError(f"threat feed {name}: is zstd-compressed and `zstandard` is not installed; "
                                 f"decompress it or pip install zstandard") from None
            reader = zstandard.ZstdDecompressor().stream_reader(io.BytesIO(data))
        else:
            reader = {"gzip": gzip.open, "bzip2": bz2.open, "xz": lzma.open}[kind](io.BytesIO(data))
        with reader:
            out = reader.read(MAX_FEED_BYTES + 1)
    except (OSError, EOFError, lzma.LZMAError, ValueError) as e:
        raise InputError(f"threat feed {name}: {kind} data is damaged or truncated ({e}); download it again") from None
    if len(out) > MAX_FEED_BYTES:
        raise InputError(f"threat feed {name}: decompresses to more than {MAX_FEED_BYTES >> 20} MiB; "
                         f"that is no feed (or a compression bomb)")
    return out


def _sample(lines: list[str], head: int = 1000, spread: int = 1000) -> list[str]:
    rest = lines[head:]
    step = max(1, len(rest) // spread)
    return lines[:head] + rest[::step]


def detect(name: str, lines: list[str], min_entry_share: float = MIN_ENTRY_SHARE) -> str:
    sample = _sample(lines)
    readings = {f: Entries.collect(PARSERS[f](sample)) for f in DETECTION_ORDER}
    good = [f for f in DETECTION_ORDER if problem(readings[f], min_entry_share) is None]
    if not good:
        if any(r.rule_lines == 0 for r in readings.values()):  # all comments, in some format's syntax
            raise InputError(f"threat feed {name}: has no rules at all ({len(lines)} blank or comment lines); "
                             f"if the feed is legitimately empty today, leave it out of network.feeds")
        tried = "; ".join(f"{f}: {problem(readings[f], min_entry_share)}" for f in DETECTION_ORDER)
        raise InputError(f"threat feed {name}: no known format reads it (tried {tried}); check that the file "
                         f"is the feed (not an error page), or declare its `format:`")
    def score(f):  # lines read into entries, then fewest unreadable lines
        return readings[f].entry_lines, -readings[f].skipped.get(UNRECOGNISED, 0)
    best = [f for f in good if score(f) == max(map(score, good))]
    disagree = [f for f in best[1:] if not readings[f].same(readings[best[0]])]
    if disagree:
        raise InputError(f"threat feed {name}: ambiguous: " + "; ".join(
            f"as {f}: {readings[f].describe()}" for f in [best[0], *disagree]) + "; declare its `format:`")
    return best[0]


def _resolve(fmt: str, lines: list[str]) -> str:
    if fmt == "firehol":
        return "netset"
    if fmt == "spamhaus":
        first = next((x.strip() for x in lines if x.strip() and not x.lstrip().startswith(("#", ";"))), "")
        return "spamhaus_json" if first.startswith("{") else "netset"
    return fmt


def read_feed(name: str, data: bytes, declared: str = "auto", min_entry_share: float = MIN_ENTRY_SHARE) -> Feed:
    """Decode, detect (when `auto`), parse and check one feed; InputError naming it when implausible."""
    if declared != "auto" and declared not in PARSERS and declared not in ALIASES:
        raise InputError(f"threat feed {name}: unknown format {declared!r}; use auto or one of "
                         f"{', '.join(FORMATS + ALIASES)}")
    text, compression = decode(name, data)
    lines = text.splitlines()
    fmt = detect(name, lines, min_entry_share) if declared == "auto" else _resolve(declared, lines)
    entries = Entries.collect(PARSERS[fmt](lines))
    if (why := problem(entries, min_entry_share)) is not None:
        how = "detected" if declared == "auto" else f"declared as {declared}" if declared != fmt else "declared"
        fix = "check that the file is the feed (not an error page or a truncated download)"
        if declared != "auto":
            try:
                other = detect(name, lines, min_entry_share)
                fix = f"its content reads as {other}: declare `format: {other}` (or `auto`)"
            except InputError:
                pass
        if why.startswith("only"):
            fix += "; lower this feed's `min_entry_share` only if its rules are meant not to block"
        raise InputError(f"threat feed {name} read as {fmt} ({how}) is implausible: {why}; found "
                         f"{entries.describe()}; {fix}")
    return Feed(name, declared, fmt, compression, hashlib.sha256(data).hexdigest(), len(data), entries)


# -- the ledger's `feeds` table ----------------------------------------------------------------------
FEEDS_SCHEMA = pa.schema([("run", pa.string()), ("feed", pa.string()), ("declared_format", pa.string()),
                          ("format", pa.string()), ("compression", pa.string()), ("bytes", pa.int64()),
                          ("rule_lines", pa.int64()), ("networks", pa.int64()), ("hosts", pa.int64()),
                          ("url_prefixes", pa.int64()), ("skipped_lines", pa.int64()), ("skipped", pa.string()),
                          ("sha256", pa.string())])


def feed_rows(run: str, records: Iterable[dict | None]) -> list[dict]:
    """Rows of the `feeds` table from `acquired.json` records (their `feeds` lists): one per feed and
    content, however many URL sources were checked against it; `skipped` as "reason n, ..."."""
    rows = {}
    for record in records:
        for f in (record or {}).get("feeds", []):
            rows.setdefault((f["feed"], f["sha256"]), {
                "run": run, **{k: f[k] for k in ("feed", "declared_format", "format", "compression", "bytes",
                                                 "rule_lines", "networks", "hosts", "url_prefixes", "sha256")},
                "skipped_lines": sum(f["skipped"].values()),
                "skipped": ", ".join(f"{r} {n}" for r, n in sorted(f["skipped"].items())) or None})
    return [rows[k] for k in sorted(rows)]
