"""Which domains' robots.txt snapshots govern a URL, for the opt-out (`curation.steps.compliance.optout`).

Domain matching (`match`, the recipe's `optout.match`): the URL's host, lower-cased, without port
and trailing dot, gives the candidate snapshots, and an opt-out in any candidate's snapshots applies.
- `host`: the host exactly and, if it starts with `www.`, also without that prefix (`www.example.com`
  URLs are governed by both `www.example.com.txt` and `example.com.txt`; `example.com` URLs only by
  `example.com.txt`).
- `registrable_domain`: the host's registrable domain (the public suffix plus one label, from the
  Public Suffix List shipped in the `publicsuffixlist` wheel: `a.stackexchange.com` ->
  `stackexchange.com`, `www.bbc.co.uk` -> `bbc.co.uk`, `foo.github.io` stays itself) and its `www.`
  form. An IP address or a bare public suffix has none.
- `both` (the default): the candidates of both rules, host first. A site owner who opts out at the
  registrable domain is honoured on every subdomain, and a subdomain's own opt-out still counts.
"""
from __future__ import annotations

import ipaddress
from functools import lru_cache
from urllib.parse import urlsplit

from publicsuffixlist import PublicSuffixList

from curation.core.urls import ascii_host
from curation.errors import RecordError

MATCH_RULES = {"host": "exact host and www.", "registrable_domain": "registrable domain",
               "both": "host and registrable domain"}   # `optout.match` -> how the ledger names it
DEFAULT_MATCH = "both"


def normalise_domain(name: str) -> str:
    try:
        return ascii_host(name.strip())
    except ValueError:
        return name.strip().lower().rstrip(".")


def url_host(url: str) -> str:
    """Lower-cased host of `url` without port or trailing dot; bare `host/path` is accepted."""
    text = url.strip()
    try:
        parts = urlsplit(text)
        if not parts.netloc and not text.startswith("/") and "://" not in text:
            parts = urlsplit("//" + text)
        host = parts.hostname or ""
    except ValueError as exc:
        raise RecordError("invalid_url", f"{url!r}: {exc}") from None
    try:
        host = ascii_host(host)  # "bücher.de" and "xn--bcher-kva.de" are one site
    except ValueError as exc:
        raise RecordError("invalid_url", f"{url!r}: {exc}") from None
    if not host:
        raise RecordError("url_without_host", f"{url!r} names no host; a domain-level opt-out cannot be checked")
    return host


@lru_cache(maxsize=1)
def _suffixes() -> PublicSuffixList:
    return PublicSuffixList()     # the list bundled in the wheel: nothing is fetched


def registrable_domain(host: str) -> str | None:
    """The registrable domain of a normalised host (public suffix plus one label), or None for an IP
    address, a bare public suffix or a single label."""
    try:
        ipaddress.ip_address(host.strip("[]"))
        return None
    except ValueError:
        pass
    return _suffixes().privatesuffix(host)


def governing(url: str, match: str) -> tuple[str, list[str]]:
    """The URL's normalised host and, in order, the domains whose snapshots govern it under `match`."""
    if match not in MATCH_RULES:
        raise ValueError(f"opt-out match {match!r} is not one of {sorted(MATCH_RULES)}")
    host = url_host(url)
    names = []
    if match in ("host", "both"):
        names.append(host)
        if host.startswith("www.") and len(host) > 4:
            names.append(host[4:])
    if match in ("registrable_domain", "both"):
        reg = registrable_domain(host)
        if reg is not None:
            names += [reg, f"www.{reg}"]
    return host, list(dict.fromkeys(names))


def web_domain(url) -> str | None:
    """The web domain a page URL counts under in the ledger's `domain_tokens` (the AI Act summary's top
    domains): its registrable domain (`a.example.co.uk` -> `example.co.uk`), the host where it has none
    (an IP address), None without a usable URL (none, or one naming no host)."""
    if not isinstance(url, str) or not url.strip():
        return None
    try:
        host = url_host(url)
    except RecordError:
        return None
    return registrable_domain(host) or host
