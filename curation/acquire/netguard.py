"""Network safeguards (Apertus 1.5 §6.4): threat feeds compiled into access lists, checked before
every connection.

Feeds are files (or URLs fetched once per run) in any format `curation.acquire.feeds` reads
(hosts, domain lists, AdBlock/uBlock, unbound, RPZ, dnsmasq, FireHOL/Spamhaus netsets and JSON,
URLhaus text and CSV; compressed or not), declared or detected; a feed that reads as (almost)
nothing is an error, never an empty list. Each yields entries of three kinds:
- networks: every address inside is blocked;
- hosts: the host and all its subdomains are blocked (an IP literal is blocked as a network);
- URL prefixes: URLs on that host (and its subdomains, for AdBlock `||` rules) whose path and
  query start with the prefix are blocked, on either scheme and any port. A prefix on an IP
  address also holds for every name that resolves to that address.

`Guard.check(url)` decides before any connection: the scheme must be http(s); no URL prefix may
match; the host and every parent domain must not be listed; the host is resolved (through an
injectable resolver) and every address it resolves to must lie outside the blocked networks and
carry no matching URL prefix. The caller connects to the checked addresses only, so a name cannot
resolve to something else between check and connect.
"""
from __future__ import annotations

import bisect
import hashlib
import ipaddress
import socket
from collections import defaultdict
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit

from curation.acquire.feed_formats import UrlPrefix, canonical_path, ip_literal
from curation.acquire.feeds import ALIASES, FORMATS, MIN_ENTRY_SHARE, Feed, read_feed
from curation.core.urls import ascii_host
from curation.errors import InputError

Resolver = Callable[[str], list[str]]
FEED_FORMATS = ("auto", *FORMATS, *ALIASES)


def system_resolver(host: str) -> list[str]:
    infos = socket.getaddrinfo(host, None, proto=socket.IPPROTO_TCP)
    return sorted({info[4][0] for info in infos})


def embedded_ipv4(address):
    """The IPv4 address an IPv6 address carries (mapped, 6to4, NAT64 64:ff9b::/96, IPv4-compatible)."""
    if address.version == 4:
        return address
    if address.ipv4_mapped is not None:
        return address.ipv4_mapped
    if address.sixtofour is not None:
        return address.sixtofour
    value = int(address)
    if value >> 32 == 0x0064FF9B0000000000000000 or (value >> 32 == 0 and value > 0xFFFF):
        return ipaddress.IPv4Address(value & 0xFFFFFFFF)
    return address


class _Networks:
    """Disjoint integer ranges per IP version; membership by binary search (feeds hold 10^5 networks)."""

    def __init__(self, networks: Iterable[ipaddress.IPv4Network | ipaddress.IPv6Network]):
        self.ranges: dict[int, tuple[list[int], list[int]]] = {}
        for version in (4, 6):
            merged = ipaddress.collapse_addresses(n for n in networks if n.version == version) \
                if any(n.version == version for n in networks) else []
            starts, ends = [], []
            for n in merged:
                starts.append(int(n.network_address))
                ends.append(int(n.broadcast_address))
            self.ranges[version] = (starts, ends)

    def __contains__(self, address: ipaddress.IPv4Address | ipaddress.IPv6Address) -> bool:
        if address.version == 6 and self._contains(address):
            return True
        return self._contains(embedded_ipv4(address))

    def _contains(self, address) -> bool:
        starts, ends = self.ranges[address.version]
        i = bisect.bisect_right(starts, int(address)) - 1
        return i >= 0 and int(address) <= ends[i]

    def __len__(self) -> int:
        return sum(len(s) for s, _ in self.ranges.values())


@dataclass(frozen=True)
class Decision:
    allowed: bool
    reason: str | None = None          # why it was refused: scheme_refused, url_blocked, domain_blocked, ...
    addresses: tuple[str, ...] = ()    # the checked addresses a connection may use
    detail: str = ""


@dataclass
class AccessLists:
    networks: _Networks
    domains: frozenset[str]
    prefixes: dict[str, tuple[UrlPrefix, ...]]  # host (or IP address) -> its URL-prefix rules
    fingerprint: str
    counts: dict[str, int] = field(default_factory=dict)
    feeds: list[dict] = field(default_factory=list)  # one `Feed.record()` per feed, for acquired.json

    @classmethod
    def from_feeds(cls, feeds: list[Feed]) -> AccessLists:
        networks, domains, prefixes = [], set(), defaultdict(set)
        digest = hashlib.sha256()
        for feed in feeds:
            digest.update(f"{feed.name}\0{feed.format}\0{feed.sha256}\0".encode())
            networks.extend(feed.entries.networks)
            domains.update(feed.entries.hosts)
            for rule in feed.entries.prefixes:
                prefixes[rule.host].add(rule)
        nets = _Networks(networks)
        return cls(nets, frozenset(domains), {h: tuple(sorted(r)) for h, r in prefixes.items()}, digest.hexdigest(),
                   {"networks": len(nets), "hosts": len(domains), "url_prefixes": sum(map(len, prefixes.values()))},
                   [f.record() for f in feeds])

    @classmethod
    def compile(cls, feeds: list[tuple[str, str, str | bytes]]) -> AccessLists:
        """`feeds`: (name, format, content) -> access lists; each feed is read and checked by `read_feed`."""
        return cls.from_feeds([read_feed(name, text.encode() if isinstance(text, str) else text, fmt)
                               for name, fmt, text in feeds])


def load_feeds(specs: list[dict]) -> AccessLists:
    """specs: [{"path": ..., "format": "auto" | ..., "name": ..., "min_entry_share": ...}] from the
    recipe; files only (no feed is fetched here). `name` (default: the path) names it in errors and
    the ledger."""
    feeds = []
    for spec in specs:
        path = Path(spec["path"])
        if not path.is_file():
            raise InputError(f"threat feed {path} does not exist; give the path of a downloaded feed file")
        feeds.append(read_feed(spec.get("name") or str(path), path.read_bytes(), spec.get("format") or "auto",
                               spec.get("min_entry_share", MIN_ENTRY_SHARE)))
    return AccessLists.from_feeds(feeds)


class Guard:
    """Checks a URL against the access lists before any connection is made."""

    def __init__(self, lists: AccessLists, resolver: Resolver = system_resolver):
        self.lists = lists
        self.resolver = resolver

    def _blocked_domain(self, host: str) -> str | None:
        labels = host.split(".")
        for i in range(len(labels)):
            if ".".join(labels[i:]) in self.lists.domains:
                return ".".join(labels[i:])
        return None

    def _blocked_prefix(self, host: str, path: str) -> UrlPrefix | None:
        labels = host.split(".")
        for i in range(len(labels)):
            for rule in self.lists.prefixes.get(".".join(labels[i:]), ()):
                if (i == 0 or rule.subdomains) and rule.matches(path):
                    return rule
        return None

    def check(self, url: str) -> Decision:
        try:
            parts = urlsplit(url)
            parts.port  # noqa: B018 - raises on a malformed port
            host = ascii_host(parts.hostname or "")
        except (ValueError, UnicodeError) as e:
            return Decision(False, "malformed_url", detail=str(e))
        if parts.scheme.lower() not in ("http", "https"):
            return Decision(False, "scheme_refused", detail=parts.scheme or "(none)")
        if not host:
            return Decision(False, "malformed_url", detail="no host")
        if parts.username is not None or parts.password is not None:
            return Decision(False, "userinfo_refused", detail="credentials in the URL")
        path = canonical_path(parts.path + (f"?{parts.query}" if parts.query else ""))
        literal = ip_literal(host)
        if (rule := self._blocked_prefix(str(literal) if literal else host, path)) is not None:
            return Decision(False, "url_blocked", detail=f"{url} (rule {rule})")
        if (domain := self._blocked_domain(host)) is not None:
            return Decision(False, "domain_blocked", detail=domain)
        try:
            addresses = [ipaddress.ip_address(host)]
        except ValueError:
            try:
                addresses = [ipaddress.ip_address(a.split("%", 1)[0]) for a in self.resolver(host)]
            except (OSError, ValueError) as e:
                return Decision(False, "dns_failed", detail=f"{host}: {e}")
            if not addresses:
                return Decision(False, "dns_failed", detail=f"{host}: no address")
        for address in addresses:
            if address in self.lists.networks:
                return Decision(False, "ip_blocked", detail=f"{host} -> {address}")
            for key in dict.fromkeys((str(address), str(embedded_ipv4(address)))) if self.lists.prefixes else ():
                if (rule := self._blocked_prefix(key, path)) is not None:
                    return Decision(False, "url_blocked", detail=f"{url}: {host} -> {address} (rule {rule})")
        return Decision(True, addresses=tuple(str(a) for a in addresses))
