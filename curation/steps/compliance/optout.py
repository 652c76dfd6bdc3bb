"""Retroactive robots.txt opt-out (Apertus 1.5 report §3.1.1).

Data crawled earlier must honour AI-crawler opt-outs retroactively: if a domain's robots.txt
disallows any of the AI agents (`DEFAULT_AGENTS`) for a URL in ANY snapshot, including one taken
later than the crawl, that URL is excluded from every crawl. The crawl date of a record therefore
plays no part in the decision.

Snapshot layout on disk (`OptOutIndex.load(path)` with `path` a folder):

    snapshots/
      2023-01-15/            one sub-folder per snapshot date, named YYYY-MM-DD
        example.com.txt      <domain>.txt: that domain's robots.txt as fetched that day
        news.example.org.txt
      2024-06-01/
        example.com.txt
      ...

A missing `<domain>.txt` means the domain served no robots.txt that day, i.e. everything was
allowed. An empty file is a robots.txt with no rules (also allows everything, but it counts as
"has a robots.txt" for the allow-list). File names are lower-cased to form the domain. Files not
ending in `.txt` and hidden entries are ignored; any other sub-folder whose name is not a date is
an error. Contents are decoded as UTF-8 (a leading BOM is dropped, invalid bytes are replaced).

Alternatively `path` may be a JSONL file (optionally `.gz`) with one row per (domain, date):
`{"domain": "example.com", "date": "2024-06-01", "robots": "User-agent: *\\n..."}`; `"robots":
null` records that the domain had no robots.txt that day. A date is a snapshot if any row names it.

Every snapshot is parsed with `protego.Protego.parse` (lenient: malformed lines are skipped;
should it ever raise, the snapshot is kept in `parse_errors` and treated as allowing everything
for the exclusion rule and as not allowing for the allow-list). Identical robots.txt contents are
parsed once. Agent matching is protego's: a `User-agent: *` group applies to every agent that no
more specific group names, so `User-agent: *` + `Disallow: /` opts out of all listed agents.

Domain matching: which snapshots govern a URL is `curation.steps.compliance.domains` (`match`).

Sources whose records keep only an image-hosting URL or another dataset's name cannot be
attributed to a site owner; callers record those as `NOT_TECHNICALLY_AVAILABLE` rather than
treating the host as the owner. This module only answers for URLs it is given.

Two policies are offered to compare (Apertus reports ~2% of MINT-1T removed by the exclusion rule
vs ~96% by a strict allow-list):
- `decision(url)`: exclusion rule, allowed unless some agent is disallowed in some snapshot;
- `allowlisted(url)`: strict allow-list, True only if the domain had a robots.txt in at least one
  snapshot and every agent is allowed for the URL in every snapshot that has one.
"""
from __future__ import annotations

import gzip
import hashlib
import json
import re
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import date as _date
from functools import lru_cache
from pathlib import Path
from typing import ClassVar
from urllib.parse import urlsplit, urlunsplit

import pyarrow as pa
from protego import Protego

from curation.core.record import Drop
from curation.errors import InputError
from curation.steps.base import Filter
from curation.steps.compliance.domains import DEFAULT_MATCH, governing, normalise_domain

DEFAULT_AGENTS = (
    "GPTBot",
    "CCBot",
    "Google-Extended",
    "anthropic-ai",
    "ClaudeBot",
    "PerplexityBot",
    "Bytespider",
    "Applebot-Extended",
)
REASON_OPT_OUT = "robots_opt_out"
NOT_TECHNICALLY_AVAILABLE = "domain-level opt-out not technically available"

_DATE_RE = re.compile(r"^\d{4}-\d{2}-\d{2}$")


@dataclass(frozen=True, slots=True)
class Decision:
    """Outcome of the exclusion rule for one URL.

    `domain`: the index domain whose robots.txt opted out; when allowed, the first candidate domain
    the index knows, else the URL's normalised host. `agent`/`snapshot`: the first agent (in the
    index's agent order) disallowed in the earliest snapshot that disallows; None when allowed.
    """

    allowed: bool
    reason: str | None
    domain: str
    agent: str | None
    snapshot: str | None


def _check_date(value: str, where: str) -> str:
    if not _DATE_RE.match(value):
        raise InputError(f"{where}: snapshot date {value!r} is not YYYY-MM-DD")
    try:
        _date.fromisoformat(value)
    except ValueError:
        raise InputError(f"{where}: snapshot date {value!r} is not a valid calendar date") from None
    return value


def _path_url(url: str) -> str:
    """What protego matches rules against: path and query, on a neutral absolute URL."""
    text = url.strip()
    parts = urlsplit(text)
    if not parts.netloc and not text.startswith("/") and "://" not in text:
        parts = urlsplit("//" + text)
    return urlunsplit(("http", "h", parts.path or "/", parts.query, ""))


class OptOutIndex:
    """robots.txt snapshots per domain, queried per URL. Build with `OptOutIndex.load`."""

    def __init__(self, entries: Iterable[tuple[str, str, bytes]], snapshot_dates: Iterable[str],
                 agents: Iterable[str] = DEFAULT_AGENTS):
        """`entries`: (date, domain, robots.txt bytes); `snapshot_dates`: every snapshot date,
        including those without any file. Prefer `OptOutIndex.load`."""
        self.agents: tuple[str, ...] = tuple(agents)
        if not self.agents:
            raise InputError("opt-out index: no user agents given; pass at least one, e.g. DEFAULT_AGENTS")
        dates = set(snapshot_dates)
        digest = hashlib.sha256()
        parsers: dict[str, Protego | None] = {}      # content sha256 -> parser (None: parse failed)
        per_domain: dict[str, list[tuple[str, str]]] = {}
        self.parse_errors: list[tuple[str, str, str]] = []  # (date, domain, error)
        seen: set[tuple[str, str]] = set()
        for day, domain, raw in sorted(entries):
            if (day, domain) in seen:
                raise InputError(f"opt-out snapshots: {domain!r} appears twice in snapshot {day}; keep one")
            seen.add((day, domain))
            dates.add(day)
            key = hashlib.sha256(raw).hexdigest()
            digest.update(f"{day}\0{domain}\0{len(raw)}\0".encode())
            digest.update(raw)
            if key not in parsers:
                try:
                    parsers[key] = Protego.parse(raw.decode("utf-8-sig", errors="replace"))
                except Exception as exc:  # protego is lenient; never let one file stop a run
                    parsers[key] = None
                    self.parse_errors.append((day, domain, f"{type(exc).__name__}: {exc}"))
            elif parsers[key] is None:
                self.parse_errors.append((day, domain, "same content as an unparsable snapshot"))
            per_domain.setdefault(domain, []).append((day, key))
        for day in sorted(dates):
            digest.update(f"date\0{day}\n".encode())
        self._parsers = parsers
        # Per domain: distinct contents in order of first appearance, with that earliest date.
        self._domains: dict[str, tuple[tuple[str, str], ...]] = {}
        for domain, rows in per_domain.items():
            firsts: dict[str, str] = {}
            for day, key in rows:  # rows are date-sorted
                firsts.setdefault(key, day)
            self._domains[domain] = tuple((day, key) for key, day in firsts.items())
        self.snapshots: tuple[str, ...] = tuple(sorted(dates))
        # per snapshot date, how many domains had a robots.txt that day (0: a date with no files); the
        # ledger's `robots_snapshots`, which the AI Act summary cites for when the opt-outs were read
        self.domains_per_snapshot: dict[str, int] = {d: sum(1 for day, _ in seen if day == d) for d in self.snapshots}
        self.fingerprint: str = digest.hexdigest()

    # ---------------------------------------------------------------- loading
    @staticmethod
    @lru_cache(maxsize=2)
    def cached(path: str, agents: tuple[str, ...], fingerprint: str) -> OptOutIndex:
        """The index a run was planned with, loaded once per worker process; snapshots that changed
        since planning are an error, never a silently different opt-out."""
        index = OptOutIndex.load(path, agents=agents)
        if index.fingerprint != fingerprint:
            raise InputError(f"robots.txt snapshots in {path} changed after the run was planned; run again")
        return index

    @classmethod
    def load(cls, path: str | Path, agents: Iterable[str] = DEFAULT_AGENTS) -> OptOutIndex:
        """Load a snapshot folder (`YYYY-MM-DD/<domain>.txt`) or a JSONL file of
        {"domain", "date", "robots"} rows; see the module docstring."""
        p = Path(path)
        if p.is_dir():
            entries, dates = cls._read_folder(p)
        elif p.is_file():
            entries, dates = cls._read_jsonl(p)
        else:
            raise InputError(f"robots.txt snapshots {p} do not exist; give a folder of YYYY-MM-DD/ "
                             "sub-folders or a JSONL file of {domain, date, robots} rows")
        return cls(entries, dates, agents)

    @staticmethod
    def _read_folder(root: Path) -> tuple[list[tuple[str, str, bytes]], list[str]]:
        entries: list[tuple[str, str, bytes]] = []
        dates: list[str] = []
        for sub in sorted(root.iterdir()):
            if sub.name.startswith(".") or not sub.is_dir():
                continue
            day = _check_date(sub.name, str(sub))
            dates.append(day)
            for f in sorted(sub.iterdir()):
                if f.name.startswith(".") or not f.name.endswith(".txt") or not f.is_file():
                    continue
                domain = normalise_domain(f.name[: -len(".txt")])
                if not domain:
                    continue
                try:
                    raw = f.read_bytes()
                except OSError as exc:
                    raise InputError(f"{f}: cannot read robots.txt snapshot ({exc})") from None
                entries.append((day, domain, raw))
        return entries, dates

    @staticmethod
    def _read_jsonl(path: Path) -> tuple[list[tuple[str, str, bytes]], list[str]]:
        entries: list[tuple[str, str, bytes]] = []
        dates: list[str] = []
        opener = gzip.open if path.name.endswith(".gz") else open
        try:
            with opener(path, "rt", encoding="utf-8", errors="replace") as fh:
                for n, line in enumerate(fh, 1):
                    if not line.strip():
                        continue
                    where = f"{path}:{n}"
                    try:
                        row = json.loads(line)
                    except json.JSONDecodeError as exc:
                        raise InputError(f"{where}: not JSON ({exc.msg})") from None
                    if not isinstance(row, dict):
                        raise InputError(f"{where}: expected an object with domain, date, robots")
                    domain, day, robots = row.get("domain"), row.get("date"), row.get("robots")
                    if not isinstance(domain, str) or not normalise_domain(domain):
                        raise InputError(f"{where}: 'domain' must be a non-empty string, got {domain!r}")
                    if not isinstance(day, str):
                        raise InputError(f"{where}: 'date' must be a YYYY-MM-DD string, got {day!r}")
                    _check_date(day, where)
                    dates.append(day)
                    if robots is None:
                        continue
                    if not isinstance(robots, str):
                        raise InputError(f"{where}: 'robots' must be a string or null, got {type(robots).__name__}")
                    entries.append((day, normalise_domain(domain), robots.encode("utf-8", errors="replace")))
        except OSError as exc:
            raise InputError(f"{path}: cannot read robots.txt snapshots ({exc})") from None
        return entries, dates

    # ---------------------------------------------------------------- queries
    @property
    def domains(self) -> int:
        """Number of domains with a robots.txt in at least one snapshot."""
        return len(self._domains)

    def __contains__(self, domain: str) -> bool:
        return normalise_domain(domain) in self._domains

    def _candidates(self, url: str, match: str = "host") -> tuple[str, list[str]]:
        """The URL's host and the domains with snapshots that govern it under `match` (`domains.MATCH_RULES`)."""
        host, names = governing(url, match)
        return host, [n for n in names if n in self._domains]

    def _first_disallowed(self, parser: Protego, target: str) -> str | None:
        for agent in self.agents:
            if not parser.can_fetch(target, agent):
                return agent
        return None

    def decision(self, url: str, match: str = "host") -> Decision:
        """Exclusion rule: opted out if any agent is disallowed for `url` in any snapshot of any domain
        that governs it under `match`."""
        host, names = self._candidates(url, match)
        target = _path_url(url)
        best: tuple[str, int, str, str] | None = None  # (date, candidate order, domain, agent)
        for order, domain in enumerate(names):
            for day, key in self._domains[domain]:  # earliest first
                if best is not None and (day, order) >= best[:2]:
                    break
                parser = self._parsers[key]
                if parser is None:
                    continue
                agent = self._first_disallowed(parser, target)
                if agent is not None:
                    best = (day, order, domain, agent)
                    break
        if best is None:
            return Decision(True, None, names[0] if names else host, None, None)
        day, _, domain, agent = best
        return Decision(False, REASON_OPT_OUT, domain, agent, day)

    def allowlisted(self, url: str, match: str = "host") -> bool:
        """Strict allow-list: a robots.txt exists in some snapshot and every agent is allowed for
        `url` in every snapshot that has one (of the domains that govern it under `match`)."""
        _, names = self._candidates(url, match)
        if not names:
            return False
        target = _path_url(url)
        for domain in names:
            for _, key in self._domains[domain]:
                parser = self._parsers[key]
                if parser is None or self._first_disallowed(parser, target) is not None:
                    return False
        return True

    def __repr__(self) -> str:
        return (f"OptOutIndex(snapshots={len(self.snapshots)}, domains={self.domains}, "
                f"agents={len(self.agents)}, fingerprint={self.fingerprint[:12]})")


class RobotsOptOut(Filter):
    """Drops records whose page URL (`url_field`) a robots.txt snapshot opts out (reason `robots_opt_out`).

    Notes, for the ledger's comparison of policies: `checked` (records with a URL), `no_url`, and
    `not_allowlisted` (what a strict allow-list would remove instead)."""
    name = "robots_optout"

    def __init__(self, index: OptOutIndex, url_field: str = "url", match: str = DEFAULT_MATCH, **kw):
        super().__init__(**kw)
        self.index = index
        self.url_field = url_field
        self.match = match

    def keep(self, record) -> bool | Drop:
        url = record.meta.get(self.url_field)
        if not isinstance(url, str) or not url.strip():
            self.stats.notes["no_url"] += 1
            return True
        decision = self.index.decision(url, self.match)  # RecordError (quarantined): a URL without a host
        self.stats.notes["checked"] += 1
        if not self.index.allowlisted(url, self.match):
            self.stats.notes["not_allowlisted"] += 1
        return True if decision.allowed else Drop(REASON_OPT_OUT, f"{decision.domain} disallows "
                                                                  f"{decision.agent} in {decision.snapshot}")

    # the ledger table this step contributes: what the opt-out removed, and what an allow-list would have
    ledger_tables: ClassVar[dict[str, pa.Schema]] = {"optout": pa.schema([("run", pa.string()), ("source", pa.string()), ("mode", pa.string()),
                                          ("records", pa.int64()), ("with_url", pa.int64()), ("removed", pa.int64()),
                                          ("allowlist_would_remove", pa.int64())])}

    @staticmethod
    def ledger_rows(run: str, source: str, stats) -> dict[str, list[dict]]:
        return {"optout": [{"run": run, "source": source, "mode": "robots.txt (page URL)", "records": stats.records_in,
                            "with_url": stats.notes["checked"], "removed": stats.dropped[REASON_OPT_OUT],
                            "allowlist_would_remove": stats.notes["not_allowlisted"] + stats.notes["no_url"]}]}
