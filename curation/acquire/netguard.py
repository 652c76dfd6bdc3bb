"""Network safeguards (Apertus 1.5 §6.4): threat feeds compiled into access lists, checked before
every connection.

Feeds (files; one entry per line, `#` or `;` comments):
- `firehol`  FireHOL ip/netset: addresses and CIDR networks
- `spamhaus` Spamhaus DROP/EDROP: `1.10.16.0/20 ; SBL256894`
- `urlhaus`  URLhaus URL lists: one URL per line. A path is invisible on the wire for HTTPS, so an
             https indicator blocks its whole host; an http one blocks that URL exactly.
- `hosts`    hosts files (`0.0.0.0 bad.example`) or bare domain lists; a domain blocks its subdomains

`Guard.check(url)` decides before any connection: the scheme must be http(s); the URL, its host
and every parent domain must not be listed; the host is resolved (through an injectable resolver)
and every address it resolves to must lie outside the blocked networks. The caller connects to the
checked addresses only, so a name cannot resolve to something else between check and connect.
"""
from __future__ import annotations

import bisect
import hashlib
import ipaddress
import socket
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit

from curation.core.urls import ascii_host, normalize_url
from curation.errors import InputError

Resolver = Callable[[str], list[str]]
FEED_FORMATS = ("firehol", "spamhaus", "urlhaus", "hosts")


def system_resolver(host: str) -> list[str]:
    infos = socket.getaddrinfo(host, None, proto=socket.IPPROTO_TCP)
    return sorted({info[4][0] for info in infos})


def _entries(text: str, fmt: str) -> Iterable[str]:
    for line in text.splitlines():
        line = line.strip()
        if line.startswith("#") or (fmt == "spamhaus" and line.startswith(";")):
            continue
        if fmt == "spamhaus":
            line = line.split(";", 1)[0]  # `net ; SBL id`; in URL lists ";" is part of the URL
        elif fmt != "urlhaus":
            line = line.split("#", 1)[0]
        if line.strip():
            yield line.strip()


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
    urls: frozenset[str]
    fingerprint: str
    counts: dict[str, int] = field(default_factory=dict)

    @classmethod
    def compile(cls, feeds: list[tuple[str, str, str]]) -> "AccessLists":
        """`feeds`: (name, format, text) -> access lists. Unparseable entries are an error naming the feed."""
        networks, domains, urls = [], set(), set()
        digest = hashlib.sha256()
        for name, fmt, text in feeds:
            digest.update(f"{name}\0{fmt}\0{hashlib.sha256(text.encode()).hexdigest()}\0".encode())
            for entry in _entries(text, fmt):
                if fmt in ("firehol", "spamhaus"):
                    try:
                        networks.append(ipaddress.ip_network(entry.split()[0], strict=False))
                    except ValueError:
                        raise InputError(f"threat feed {name!r} ({fmt}): {entry!r} is no IP address or network; "
                                         f"fix the feed or declare its right format") from None
                elif fmt == "urlhaus":
                    try:
                        parts = urlsplit(entry)
                        host = ascii_host(parts.hostname or "")
                    except ValueError:
                        continue  # no usable host: nothing this entry could ever match
                    if parts.scheme == "https" and host:
                        _block_host(host, domains, networks)  # the path of an https URL is invisible
                    elif (url := normalize_url(entry)) is not None:
                        urls.add(url)
                elif fmt == "hosts":
                    words = entry.split()
                    for host in (words[1:] if len(words) > 1 else words):
                        if host.lower().rstrip(".") not in ("localhost", "0.0.0.0", "broadcasthost"):
                            try:
                                _block_host(ascii_host(host), domains, networks)
                            except ValueError:
                                continue
                else:
                    raise InputError(f"threat feed {name!r}: unknown format {fmt!r}; use one of {FEED_FORMATS}")
        nets = _Networks(networks)
        return cls(nets, frozenset(domains), frozenset(urls), digest.hexdigest(),
                   {"networks": len(nets), "domains": len(domains), "urls": len(urls)})


def _block_host(host: str, domains: set, networks: list) -> None:
    """An IP literal is blocked as a network (so its other spellings, which resolve to it, are too)."""
    try:
        address = ipaddress.ip_address(host.strip("[]"))
    except ValueError:
        domains.add(host)
        return
    networks.append(ipaddress.ip_network(address))


def load_feeds(specs: list[dict]) -> AccessLists:
    """specs: [{"path": ..., "format": ...}] from the recipe; files only (no feed is fetched at run time)."""
    feeds = []
    for spec in specs:
        path = Path(spec["path"])
        if not path.is_file():
            raise InputError(f"threat feed {path} does not exist; give the path of a downloaded feed file")
        feeds.append((path.name, spec["format"], path.read_text(encoding="utf-8", errors="replace")))
    return AccessLists.compile(feeds)


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
        if normalize_url(url) in self.lists.urls:
            return Decision(False, "url_blocked", detail=url)
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
        return Decision(True, addresses=tuple(str(a) for a in addresses))
