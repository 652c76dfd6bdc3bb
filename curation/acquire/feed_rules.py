"""Threat feeds written in resolver and filter-rule syntaxes: AdBlock/uBlock/AdGuard filter lists,
unbound `local-zone`/`local-data`, dnsmasq `address=/…/`, and RPZ zone files. Outcomes and entry
kinds as in `curation.acquire.feed_formats`.

What blocks and what does not (never silently: every non-blocking rule is counted by reason):
- AdBlock: `||host^` (and its options) blocks the host; `||host/path…`, `|http://host/path…` are
  URL prefixes; a bare `host` line is a host. `@@` exceptions are counted, never applied (an
  exception cannot open what another feed blocks); cosmetic (`##`, `#@#`, `#?#`, `#$#`, `#%#`,
  `$$`) and non-blocking modifier rules (`$removeparam`, `$csp`, ...) are counted; options that
  narrow a block to a context the guard cannot see (`$domain=`, `$third-party`, types) are ignored,
  so the rule blocks everywhere. Regex, wildcard-host and substring rules are counted as unsupported.
- unbound: `local-zone` of a blocking type and every `local-data` name are hosts; transparent,
  typetransparent, inform, nodefault zones are counted as `non_blocking_zone`.
- RPZ: a trigger name (owner name minus the zone origin) with an NXDOMAIN (`CNAME .`), NODATA
  (`CNAME *.`), drop, redirect or local-data action is a host; `rpz-ip` triggers are networks;
  `rpz-passthru.` is counted as an exception; nsdname/nsip/client-ip triggers are counted.
"""
from __future__ import annotations

import ipaddress
import re
from collections.abc import Iterable, Iterator

from curation.acquire.feed_formats import (
    UNRECOGNISED,
    Outcome,
    UrlPrefix,
    canonical_path,
    host_entry,
    hosts_line,
    ip_literal,
)

# -- AdBlock / uBlock Origin / AdGuard ---------------------------------------------------------------
_COSMETIC = re.compile(r"#@?[?$%]?#|\$@?\$")
_OPTIONS = re.compile(r"[\w~,=\-|.*:/+]*")
NON_BLOCKING_OPTIONS = frozenset({"removeparam", "queryprune", "csp", "cookie", "stealth", "replace",
                                  "permissions", "header", "removeheader", "urltransform", "hls",
                                  "jsonprune", "referrerpolicy", "redirect-rule", "generichide",
                                  "elemhide", "specifichide", "genericblock", "content", "jsinject",
                                  "urlblock", "extension"})


def parse_adblock(lines: Iterable[str]) -> Iterator[Outcome]:
    for line in lines:
        yield adblock_rule(line.strip())


def adblock_rule(line: str) -> Outcome:
    if not line or line == "#" or line.startswith(("!", "# ")) or (line.startswith("[") and line.endswith("]")):
        return None  # comments, `[Adblock Plus 2.0]` headers, AdGuard `#` comments
    if _COSMETIC.search(line):
        return "cosmetic_rule"
    if line.startswith("@@"):
        return "exception_rule"
    pattern, options = line, ""
    if (cut := line.rfind("$")) > 0 and _OPTIONS.fullmatch(line[cut + 1:]):
        pattern, options = line[:cut], line[cut + 1:]
    names = {o.split("=", 1)[0].lstrip("~").lower() for o in options.split(",") if o}
    if "badfilter" in names:
        return "badfilter_rule"  # it would disable another rule: counted, not applied (fail closed)
    if names & NON_BLOCKING_OPTIONS:
        return "modifier_rule"
    if len(pattern) > 1 and pattern.startswith("/") and pattern.endswith("/"):
        return "regex_rule"
    if len(pattern.split()) >= 2 and ip_literal(pattern.split()[0]) is not None:
        return hosts_line(pattern)  # AdGuard Home reads hosts syntax too
    if pattern.startswith("||"):
        return _host_rule(pattern[2:], subdomains=True)
    if pattern.startswith("|"):
        rest = pattern[1:]
        scheme = re.match(r"(?i)(https?|wss?)://", rest)
        return _host_rule(rest[scheme.end():], subdomains=False) if scheme else "unsupported_rule"
    if re.match(r"(?i)[a-z][a-z0-9+.-]*://", pattern):
        return "substring_rule"  # a bare URL matches anywhere in a URL; a URL list is format `urlhaus`
    host = re.split(r"[/^:|?]", pattern, maxsplit=1)[0]
    if host and "*" not in host and (entry := host_entry(host)) is not None and \
            (isinstance(entry, str) or pattern == host):  # `1.2.3.0/24` is a network, not a path
        return _host_rule(pattern, subdomains=True)
    return "substring_rule" if pattern else "generic_rule"


def _host_rule(rest: str, subdomains: bool) -> Outcome:
    """`host[:port][^][/path…][^|*…]` after the `||` or `|scheme://` anchor."""
    m = re.match(r"([^/^:|?*]*)(\*)?", rest)
    host, wild = m.group(1), m.group(2)
    if not host or wild:
        return "wildcard_host"
    tail = rest[m.end():]
    if tail.startswith(":"):
        tail = re.sub(r"^:\d*", "", tail)  # ports are ignored: a rule holds on every port
    entry = host_entry(host, single_label=True)
    if entry is None:
        return UNRECOGNISED
    if not tail.startswith(("/", "?")):
        return [entry]  # `||host^`, `||host`, `||host^|`: the host (and subdomains)
    path = re.match(r"[^*^|]*", tail).group(0)
    boundary = tail[len(path):len(path) + 1] in ("^", "|")
    canon = entry if isinstance(entry, str) else str(entry.network_address)
    return [UrlPrefix(canon, canonical_path(path), subdomains=subdomains, boundary=boundary)]


# -- unbound -----------------------------------------------------------------------------------------
BLOCKING_ZONES = frozenset({"deny", "refuse", "static", "redirect", "inform_deny", "always_refuse",
                            "always_nxdomain", "always_null", "always_deny", "block_a"})
NON_BLOCKING_ZONES = frozenset({"transparent", "typetransparent", "inform", "inform_redirect",
                                "always_transparent", "nodefault", "noview"})


def parse_unbound(lines: Iterable[str]) -> Iterator[Outcome]:
    for line in lines:
        line = strip_comment(line, "#").strip()
        m = re.match(r"([\w-]+):\s*(.*)$", line)
        if not line:
            yield None
        elif m is None:
            yield UNRECOGNISED
        elif m.group(1) == "local-zone":
            words = m.group(2).replace('"', " ").split()
            kind = words[1].lower() if len(words) == 2 else ""
            if kind in NON_BLOCKING_ZONES:
                yield "non_blocking_zone"
            elif kind not in BLOCKING_ZONES or words[0] == ".":
                yield UNRECOGNISED
            else:
                yield [e] if (e := host_entry(words[0], single_label=True)) is not None else UNRECOGNISED
        elif m.group(1) == "local-data":
            words = m.group(2).strip().strip('"').split()
            if any(w.upper() == "PTR" for w in words[1:4]):
                yield "ptr_record"
            else:
                yield [e] if words and (e := host_entry(words[0], single_label=True)) is not None else UNRECOGNISED
        elif m.group(1) == "local-data-ptr":
            yield "ptr_record"
        else:
            yield None  # `server:` and other configuration directives


# -- dnsmasq -----------------------------------------------------------------------------------------
def parse_dnsmasq(lines: Iterable[str]) -> Iterator[Outcome]:
    """`address=/a.example/b.example/0.0.0.0` (any target, or none: NXDOMAIN), `local=/a.example/`,
    `server=/a.example/` (answered locally only); `server=/x/1.2.3.4` forwards and blocks nothing."""
    for line in lines:
        line = line.split("#", 1)[0].strip() if not re.match(r"\s*\w+=/", line) else line.strip()
        m = re.match(r"([\w-]+)=(.*)$", line)
        if not line:
            yield None
        elif m is None:
            yield UNRECOGNISED
        elif m.group(1) not in ("address", "local", "server"):
            yield None  # other configuration directives
        elif not m.group(2).startswith("/") or m.group(2).count("/") < 2:
            yield UNRECOGNISED
        else:
            parts = m.group(2).split("/")
            domains, target = parts[1:-1], parts[-1].strip()
            if target.startswith("#") and target != "#":
                target = ""  # a trailing comment
            if m.group(1) == "server" and target:
                yield "forward_rule"
            elif "#" in domains:
                yield "wildcard_all"
            else:
                entries = [e for e in (host_entry(d, single_label=True) for d in domains if d) if e is not None]
                yield entries or UNRECOGNISED


# -- RPZ zone files ----------------------------------------------------------------------------------
_TTL = re.compile(r"(?i)\d+[smhdw]?(\d+[smhdw])*$")
_CLASSES = {"IN", "CH", "HS", "CS"}
_ZONE_TYPES = {"SOA", "NS"}
_RR_TYPES = {"A", "AAAA", "CNAME", "DNAME", "TXT", "MX", "PTR", "SRV", "NAPTR", "HTTPS", "SVCB", "CAA", "HINFO",
             "LOC", "SSHFP", "TLSA", "DS", "DNSKEY", "RRSIG", "NSEC", "NSEC3", "SPF", "URI"}


def parse_rpz(lines: Iterable[str]) -> Iterator[Outcome]:
    """Zone-file syntax: `$ORIGIN` (relative values stack on the current origin), `$TTL`, owner names
    relative to the origin or absolute (trailing dot), a blank owner repeating the last one, optional
    TTL and class, `( … )` spanning lines. The zone's origin is the first `$ORIGIN`, or an absolute
    SOA owner; an absolute owner outside a known origin cannot be turned into a trigger and is
    counted (`absolute_name_unknown_origin`): give the file its `$ORIGIN`."""
    zone: str | None = None
    origin, owner, pending, first = "", None, "", ""
    for raw in lines:
        text = strip_comment(raw, ";")
        if pending:  # inside `( … )`
            pending += " " + text
            if ")" not in text:
                yield None
                continue
            text, pending, raw = pending.replace("(", " ").replace(")", " "), "", first
        elif "(" in text and ")" not in text:
            pending, first = text, raw
            yield None
            continue
        if not text.strip():
            yield None
            continue
        words = text.split()
        if words[0].upper() == "$ORIGIN" and len(words) > 1:
            value = words[1].lower()
            origin = value[:-1] if value.endswith(".") else ".".join(x for x in (value, origin) if x)
            zone = origin if zone is None else zone
            yield None
            continue
        if words[0].startswith("$"):
            yield None if words[0].upper() in ("$TTL", "$GENERATE") else "unsupported_directive"
            continue
        if not raw[:1].isspace():
            owner = words.pop(0)
        while words and (_TTL.fullmatch(words[0]) or words[0].upper() in _CLASSES):
            words.pop(0)
        if owner is None or not words:
            yield UNRECOGNISED
            continue
        rtype, rdata = words[0].upper(), [w.lower() for w in words[1:]]
        name = origin if owner == "@" else owner.lower()[:-1] if owner.endswith(".") else \
            ".".join(x for x in (owner.lower(), origin) if x)
        if rtype not in _ZONE_TYPES | _RR_TYPES:
            yield UNRECOGNISED
            continue
        if rtype in _ZONE_TYPES:
            if rtype == "SOA" and zone is None and owner.endswith(".") and owner != ".":
                zone = name
            yield None
            continue
        yield _rpz_record(_trigger(name, owner, zone), rtype, rdata)


def strip_comment(line: str, mark: str) -> str:
    """The line up to a comment mark that is not inside double quotes."""
    if mark not in line:
        return line.rstrip()
    out, quoted = [], False
    for c in line:
        if c == '"':
            quoted = not quoted
        elif c == mark and not quoted:
            break
        out.append(c)
    return "".join(out).rstrip()


def _trigger(name: str, owner: str, zone: str | None) -> str | None:
    if zone:
        if name == zone:
            return ""
        if name.endswith("." + zone):
            return name[:-len(zone) - 1]
    if owner.endswith(".") and not zone:
        return None
    return name


def _rpz_record(trigger: str | None, rtype: str, rdata: list[str]) -> Outcome:
    if trigger is None:
        return "absolute_name_unknown_origin"
    if trigger == "":
        return None  # other records at the zone apex
    if rtype == "CNAME" and rdata[:1] == ["rpz-passthru."]:
        return "passthru_rule"
    if rtype == "CNAME" and rdata[:1] == ["rpz-tcp-only."]:
        return "tcp_only_rule"
    if trigger.endswith((".rpz-nsdname", ".rpz-nsip", ".rpz-client-ip")):
        return "ns_or_client_trigger"
    if trigger.endswith(".rpz-ip"):
        return _rpz_ip(trigger[:-len(".rpz-ip")]) or UNRECOGNISED
    entry = host_entry(trigger, single_label=True)
    return [entry] if entry is not None else UNRECOGNISED


def _rpz_ip(labels: str) -> list | None:
    """`24.0.2.0.192` → 192.0.2.0/24; `128.1.zz.3.2.2001` → 2001:2:3::1/128 (labels reversed)."""
    parts = labels.split(".")
    if len(parts) < 2 or not parts[0].isdigit():
        return None
    prefix, rest = parts[0], parts[1:][::-1]
    if len(rest) == 4 and all(p.isdigit() for p in rest):
        text = ".".join(rest)
    else:
        text = ":".join("" if p == "zz" else p for p in rest)
        text = (":" + text if text.startswith(":") else text)
        text = (text + ":" if text.endswith(":") and not text.endswith("::") else text)
    try:
        return [ipaddress.ip_network(f"{text}/{prefix}", strict=False)]
    except ValueError:
        return None
