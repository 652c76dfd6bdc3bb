"""One parser per threat-feed format, each turning lines into entries of three kinds.

- a network (`ipaddress.ip_network`): every address inside it is blocked;
- a host (`str`, IDNA form): the host and all its subdomains are blocked (as the guard's host lists
  always did, so `*.host`, `host` and `||host^` mean the same: the more blocking reading);
- a URL prefix (`UrlPrefix`): URLs on that host (optionally its subdomains too) whose path and query
  start with the prefix, case-insensitively, on any port and either scheme.

A parser yields one outcome per line: `None` for a line that is no rule (blank, comment, header,
zone/server directive), a skip reason (`str`) for a rule that blocks nothing or cannot be read,
or a list of entries. `unrecognised` is the reason for a line the format cannot read at all; the
other reasons name rules the format knows but that block nothing here (exceptions, cosmetic rules,
passthru zones, ...). `curation.acquire.feeds` collects the outcomes and judges plausibility.
"""
from __future__ import annotations

import csv
import ipaddress
import json
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from urllib.parse import unquote, urlsplit

from curation.core.urls import ascii_host

UNRECOGNISED = "unrecognised"
Outcome = None | str | list


@dataclass(frozen=True, order=True)
class UrlPrefix:
    host: str                # IDNA host, or an IP address in its compressed form
    path: str                # canonical path (and query), see `canonical_path`; lower case
    subdomains: bool = True  # also on subdomains of `host` (AdBlock `||`)
    boundary: bool = False   # the prefix must end at a separator (AdBlock `^`; URLhaus URLs)

    def matches(self, path: str) -> bool:
        """`path`: a canonical path (`canonical_path`) of a URL on this rule's host."""
        if not path.startswith(self.path):
            return False
        if not self.boundary or len(path) == len(self.path) or _separator(self.path[-1]):
            return True
        return _separator(path[len(self.path)])

    def __str__(self) -> str:
        return f"{'||' if self.subdomains else '|'}{self.host}{self.path}{'^' if self.boundary else ''}"


def _separator(c: str) -> bool:
    """AdBlock's `^`: anything but a letter, a digit or one of `_ - . %`."""
    return not (c.isalnum() or c in "_-.%")


def canonical_path(target: str) -> str:
    """Path and query as matched: percent-decoded, dot segments removed, lower case (so
    `/A/../View%2Eexe` and `/view.exe` are one path; matching errs towards blocking)."""
    path, q, query = target.partition("?")
    path = unquote(path)
    segments, out = (path if path.startswith("/") else "/" + path).split("/")[1:], []
    for i, s in enumerate(segments):
        if s in (".", ".."):
            if s == ".." and out:
                out.pop()
            if i == len(segments) - 1:
                out.append("")
        else:
            out.append(s)
    return ("/" + "/".join(out) + (q + unquote(query) if q else "")).lower()


_LABEL = re.compile(r"[a-z0-9_](?:[a-z0-9_-]{0,61}[a-z0-9_])?")
LOCAL_NAMES = frozenset({"localhost", "localhost.localdomain", "local", "broadcasthost", "localhost4",
                         "localhost6", "localhost4.localdomain4", "localhost6.localdomain6", "ip6-localhost",
                         "ip6-loopback", "ip6-localnet", "ip6-mcastprefix", "ip6-allnodes", "ip6-allrouters",
                         "ip6-allhosts", "0.0.0.0"})


def ip_literal(text: str):
    try:
        return ipaddress.ip_address(text.strip("[]").split("%", 1)[0])
    except ValueError:
        return None


def host_entry(name: str, single_label: bool = False):
    """A host name (`*.` / `.` wildcard prefixes and a trailing dot allowed) as an entry: an IP
    literal becomes a /32 or /128 network; None when it is no valid name. Single-label names are
    refused unless the syntax makes them explicit (`||zip^`): in plain lists they are header junk."""
    name = name.strip().removeprefix("*.").lstrip(".")
    if (address := ip_literal(name)) is not None:
        return ipaddress.ip_network(address)
    try:
        host = ascii_host(name)
    except ValueError:
        return None
    labels = host.split(".")
    if not host or len(host) > 253 or not all(_LABEL.fullmatch(x) for x in labels) or labels[-1].isdigit():
        return None
    return host if single_label or len(labels) > 1 else None


def _canonical_host(host: str) -> str | None:
    entry = host_entry(host, single_label=True)
    return None if entry is None else (str(entry.network_address) if not isinstance(entry, str) else entry)


def _strip_comment(line: str, marks: str = "#") -> str:
    for mark in marks:
        line = line.split(mark, 1)[0]
    return line.strip()


# -- hosts files and plain domain lists -------------------------------------------------------------
def hosts_line(line: str) -> Outcome:
    """`0.0.0.0 a.example b.example` (any address: 127.0.0.1, ::, ::1, a redirect target)."""
    words = line.split()
    if len(words) < 2 or ip_literal(words[0]) is None:
        return UNRECOGNISED
    names = [w for w in words[1:] if w.lower().rstrip(".") not in LOCAL_NAMES]
    if not names:
        return "local_name"
    entries = [e for e in (host_entry(n) for n in names) if e is not None]
    return entries or UNRECOGNISED


def parse_hosts(lines: Iterable[str]) -> Iterator[Outcome]:
    """Hosts files; a bare domain line is accepted too (as the `hosts` format always did)."""
    for line in lines:
        line = _strip_comment(line)
        if not line:
            yield None
        elif len(line.split()) == 1:
            yield [e] if (e := host_entry(line)) is not None else UNRECOGNISED
        else:
            yield hosts_line(line)


def parse_domains(lines: Iterable[str]) -> Iterator[Outcome]:
    """One name per line (`bad.example`, `*.bad.example`, `.bad.example`, IP literals), `#` comments."""
    for line in lines:
        line = _strip_comment(line)
        if not line:
            yield None
        else:
            yield [e] if " " not in line and (e := host_entry(line)) is not None else UNRECOGNISED


# -- address lists ------------------------------------------------------------------------------------
def network_entry(text: str):
    """`1.2.3.4`, `1.2.3.0/24`, `2001:db8::/32` or a range `1.2.3.4-1.2.3.9`; None otherwise."""
    try:
        if "-" in text:
            first, last = (ipaddress.ip_address(t) for t in text.split("-", 1))
            return list(ipaddress.summarize_address_range(first, last))
        return [ipaddress.ip_network(text, strict=False)]
    except (ValueError, TypeError):
        return None


def parse_netset(lines: Iterable[str]) -> Iterator[Outcome]:
    """FireHOL ip/netsets, Spamhaus DROP text (`net ; SBL id`), IPsum (`ip<TAB>count`)."""
    for line in lines:
        line = _strip_comment(line, "#;")
        if not line:
            yield None
            continue
        words = line.split()
        if len(words) > 2 or (len(words) == 2 and not words[1].isdigit()):
            yield UNRECOGNISED  # e.g. a hosts line: `0.0.0.0 host` is no network list
            continue
        yield network_entry(words[0]) or UNRECOGNISED


def parse_spamhaus_json(lines: Iterable[str]) -> Iterator[Outcome]:
    """Spamhaus DROP/EDROP JSON lines: `{"cidr": "1.10.16.0/20", "sblid": ..., "rir": ...}`."""
    for line in lines:
        line = line.strip()
        if not line:
            yield None
            continue
        try:
            obj = json.loads(line)
        except json.JSONDecodeError:
            yield UNRECOGNISED
            continue
        if not isinstance(obj, dict):
            yield UNRECOGNISED
        elif obj.get("type") == "metadata":
            yield None  # the trailing {"type": "metadata", "records": N, ...} line
        else:
            cidr = obj.get("cidr")
            yield (network_entry(cidr) if isinstance(cidr, str) else None) or UNRECOGNISED


# -- URL lists ---------------------------------------------------------------------------------------
def url_entry(url: str) -> Outcome:
    """A URLhaus indicator. The path of an https URL is invisible to a proxy without TLS interception,
    so (as Apertus 1.5 §6.4) an https indicator blocks its whole host; an http one is a URL prefix on
    that host (ending at a separator: `/x.exe` blocks `/x.exe?a=1`, not `/x.exe2`)."""
    try:
        parts = urlsplit(url.strip())
        scheme = parts.scheme.lower()
        host = parts.hostname or ""
    except ValueError:
        return UNRECOGNISED
    if scheme not in ("http", "https") or not host or " " in url.strip():
        return "not_http" if parts.scheme and "://" in url and host else UNRECOGNISED
    if scheme == "https":
        return [e] if (e := host_entry(host, single_label=True)) is not None else UNRECOGNISED
    if (canon := _canonical_host(host)) is None:
        return UNRECOGNISED
    return [UrlPrefix(canon, canonical_path(parts.path + (f"?{parts.query}" if parts.query else "")),
                      subdomains=False, boundary=True)]


def parse_urlhaus(lines: Iterable[str]) -> Iterator[Outcome]:
    """One URL per line, `#` comment lines (a `#` inside a URL is part of it)."""
    for line in lines:
        line = line.strip()
        yield None if not line or line.startswith("#") else url_entry(line)


def parse_urlhaus_csv(lines: Iterable[str]) -> Iterator[Outcome]:
    """URLhaus CSV dumps: `# id,dateadded,url,url_status,...` as the last comment line, quoted rows;
    also the host/path lookup variant (`"host","path",...` header row). Without a header the first
    field that is an http(s) URL is taken."""
    header: list[str] | None = None
    for line in lines:
        stripped = line.strip()
        if not stripped:
            yield None
            continue
        if stripped.startswith("#"):
            fields = [f.strip().lower() for f in next(csv.reader([stripped.lstrip("# ")]), [])]
            if "url" in fields or "host" in fields:
                header = fields
            yield None
            continue
        row = next(csv.reader([stripped]), [])
        lowered = [f.strip().lower() for f in row]
        if header is None and ("url" in lowered or "host" in lowered) and \
                not any("://" in f for f in lowered):
            header = lowered
            yield None
            continue
        yield _csv_row(row, header)


def _csv_row(row: list[str], header: list[str] | None) -> Outcome:
    def field(name):
        i = header.index(name) if header and name in header else None
        return row[i].strip() if i is not None and i < len(row) else None

    if (url := field("url")) is not None:
        return url_entry(url)
    if (host := field("host")) is not None:
        path = field("path") or ""
        if not path or path == "/":
            return [e] if (e := host_entry(host, single_label=True)) is not None else UNRECOGNISED
        canon = _canonical_host(host)
        return [UrlPrefix(canon, canonical_path(path), subdomains=True, boundary=True)] if canon else UNRECOGNISED
    first = next((f for f in row if f.strip().lower().startswith(("http://", "https://"))), None)
    return url_entry(first) if first is not None else UNRECOGNISED
