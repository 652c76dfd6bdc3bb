"""Retroactive robots.txt opt-out (curation/steps/compliance/optout.py): snapshot folders built in tmp_path."""
from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from curation.errors import InputError, RecordError
from curation.steps.compliance.optout import (
    DEFAULT_AGENTS,
    REASON_OPT_OUT,
    Decision,
    OptOutIndex,
)

ALLOW_ALL = "User-agent: *\nAllow: /\n"
GPTBOT_OFF = "User-agent: GPTBot\nDisallow: /\n"

# date -> {domain: robots.txt}; a domain absent on a date had no robots.txt that day.
SNAPSHOTS = {
    "2023-01-10": {
        "retro.example": ALLOW_ALL,
        "open.example": ALLOW_ALL,
        "paths.example": "User-agent: CCBot\nDisallow: /private/\n",
        "star.example": "User-agent: *\nDisallow: /\n",
        "other.example": "User-agent: SomeOtherBot\nDisallow: /\n",
        "example.org": GPTBOT_OFF,
    },
    "2023-09-01": {
        "open.example": "# comment only\nUser-agent: *\nDisallow:\n",
        "late.example": ALLOW_ALL,
        "www.wwwonly.example": "User-agent: ClaudeBot\nDisallow: /\n",
    },
    "2024-06-01": {
        "retro.example": GPTBOT_OFF,
        "open.example": ALLOW_ALL,
        "late.example": "User-agent: CCBot\nUser-agent: Bytespider\nDisallow: /\n",
        "example.org": "User-agent: *\nDisallow: /\n",
    },
}


def write_snapshots(root: Path, snapshots: dict[str, dict[str, str]] = SNAPSHOTS) -> Path:
    for day, files in snapshots.items():
        (root / day).mkdir(parents=True, exist_ok=True)
        for domain, text in files.items():
            (root / day / f"{domain}.txt").write_text(text, encoding="utf-8")
    return root


@pytest.fixture()
def index(tmp_path: Path) -> OptOutIndex:
    return OptOutIndex.load(write_snapshots(tmp_path / "robots"))


def test_load_shape(index: OptOutIndex):
    assert index.snapshots == ("2023-01-10", "2023-09-01", "2024-06-01")
    assert index.domains == 8
    assert index.agents == DEFAULT_AGENTS
    assert len(index.fingerprint) == 64
    assert index.parse_errors == []


def test_retroactive_opt_out_excludes_earlier_crawl(index: OptOutIndex):
    # Crawled in 2022, robots.txt allowed everything in 2023-01, GPTBot disallowed in 2024-06:
    # the record is excluded anyway; the crawl date plays no part.
    d = index.decision("https://retro.example/articles/2022/story.html")
    assert d == Decision(False, REASON_OPT_OUT, "retro.example", "GPTBot", "2024-06-01")
    assert dataclasses.is_dataclass(d)
    with pytest.raises(dataclasses.FrozenInstanceError):
        d.allowed = True  # type: ignore[misc]


def test_earliest_snapshot_and_first_agent_reported(index: OptOutIndex):
    # example.org: GPTBot off in 2023-01, everything off in 2024-06 -> earliest snapshot wins.
    d = index.decision("http://example.org/x")
    assert (d.allowed, d.snapshot, d.agent) == (False, "2023-01-10", "GPTBot")
    # late.example disallows CCBot and Bytespider: the first in DEFAULT_AGENTS order is reported.
    d = index.decision("http://late.example/")
    assert (d.allowed, d.snapshot, d.agent) == (False, "2024-06-01", "CCBot")


def test_path_specific_disallow(index: OptOutIndex):
    blocked = index.decision("https://paths.example/private/data.html")
    assert (blocked.allowed, blocked.reason, blocked.agent) == (False, REASON_OPT_OUT, "CCBot")
    assert index.decision("https://paths.example/private").allowed  # not under /private/
    assert index.decision("https://paths.example/public/page?q=1").allowed
    assert index.decision("https://paths.example/").allowed
    assert not index.allowlisted("https://paths.example/private/data.html")
    assert index.allowlisted("https://paths.example/public/page")


def test_wildcard_user_agent_opts_out_every_agent(index: OptOutIndex):
    d = index.decision("https://star.example/anything")
    assert not d.allowed and d.reason == REASON_OPT_OUT
    assert d.agent == DEFAULT_AGENTS[0]  # protego applies `*` to every agent asked about
    for agent in DEFAULT_AGENTS:
        single = OptOutIndex([("2023-01-10", "star.example", b"User-agent: *\nDisallow: /\n")],
                             [], agents=(agent,))
        assert single.decision("https://star.example/").agent == agent


def test_unlisted_agent_does_not_opt_out(index: OptOutIndex):
    d = index.decision("https://other.example/page")
    assert d == Decision(True, None, "other.example", None, None)
    assert index.allowlisted("https://other.example/page")


def test_custom_agent_list(tmp_path: Path):
    # The same robots.txt does opt out when that agent is one the index checks.
    idx = OptOutIndex.load(write_snapshots(tmp_path / "r"), agents=("SomeOtherBot",))
    d = idx.decision("https://other.example/page")
    assert (d.allowed, d.agent) == (False, "SomeOtherBot")
    assert idx.decision("https://retro.example/").allowed  # GPTBot is not checked now


def test_www_handling(index: OptOutIndex):
    # www.<domain> URLs are governed by <domain>.txt too...
    d = index.decision("https://WWW.Retro.Example:8443/a")
    assert (d.allowed, d.domain, d.agent) == (False, "retro.example", "GPTBot")
    # ...and by their own www.<domain>.txt.
    d = index.decision("https://www.wwwonly.example/page")
    assert (d.allowed, d.domain, d.agent, d.snapshot) == (False, "www.wwwonly.example", "ClaudeBot", "2023-09-01")
    # The bare domain is not governed by www.<domain>.txt (only a leading www. is stripped).
    d = index.decision("https://wwwonly.example/page")
    assert d.allowed and d.domain == "wwwonly.example"
    # Other subdomains do not inherit the parent's robots.txt.
    assert index.decision("https://blog.retro.example/a").allowed
    # Port and case do not matter; host-less scheme-less input is accepted.
    assert not index.decision("retro.example/a").allowed
    assert not index.decision("HTTP://RETRO.EXAMPLE:80/a").allowed


def test_no_robots_anywhere_allowed_but_not_allowlisted(index: OptOutIndex):
    d = index.decision("https://never.example/page")
    assert d == Decision(True, None, "never.example", None, None)
    assert not index.allowlisted("https://never.example/page")


def test_allowlisted_semantics(index: OptOutIndex):
    # robots.txt present in 3 snapshots, every agent allowed in each (empty Disallow = allow).
    assert index.allowlisted("https://open.example/a/b")
    assert index.allowlisted("https://www.open.example/a/b")
    # Absent in some snapshots is fine as long as the ones present allow.
    assert index.allowlisted("https://other.example/")
    # Allowed in early snapshots but disallowed later: not allow-listed (and excluded).
    assert not index.allowlisted("https://retro.example/")
    assert not index.allowlisted("https://late.example/")
    assert not index.allowlisted("https://star.example/")
    # An empty robots.txt counts as present and allowing.
    idx = OptOutIndex([("2024-01-01", "empty.example", b"")], [])
    assert idx.allowlisted("https://empty.example/x")
    assert idx.decision("https://empty.example/x").allowed


def test_allowlist_is_stricter_than_exclusion(index: OptOutIndex):
    urls = [f"https://{d}/page" for d in
            ("retro.example", "open.example", "paths.example", "star.example", "other.example",
             "example.org", "late.example", "never.example", "nothing.example")]
    excluded = sum(not index.decision(u).allowed for u in urls)
    not_allowlisted = sum(not index.allowlisted(u) for u in urls)
    assert excluded == 4 and not_allowlisted == 6
    assert all(index.decision(u).allowed for u in urls if index.allowlisted(u))


def test_fingerprint_changes_with_content(tmp_path: Path):
    root = write_snapshots(tmp_path / "r")
    first = OptOutIndex.load(root).fingerprint
    assert OptOutIndex.load(root).fingerprint == first  # deterministic
    (root / "2023-09-01" / "open.example.txt").write_text("User-agent: *\nDisallow: /x\n")
    changed = OptOutIndex.load(root).fingerprint
    assert changed != first
    (root / "2023-09-01" / "open.example.txt").unlink()
    assert OptOutIndex.load(root).fingerprint not in (first, changed)
    (root / "2025-01-01").mkdir()  # a new, empty snapshot
    idx = OptOutIndex.load(root)
    assert idx.snapshots[-1] == "2025-01-01"
    assert len({first, changed, idx.fingerprint}) == 3


def test_malformed_and_invalid_utf8_do_not_crash(tmp_path: Path):
    root = tmp_path / "r"
    (root / "2024-01-01").mkdir(parents=True)
    (root / "2024-01-01" / "junk.example.txt").write_bytes(
        b"\x00\xff\xfe<html>not robots</html>\nDisallow /nocolon\nUser-agent GPTBot\n::::\n"
        b"Crawl-delay: banana\nRequest-rate: -1/0\nVisit-time: never\n")
    (root / "2024-01-01" / "latin1.example.txt").write_bytes(
        b"# caf\xe9 \xff\xfe\nUser-agent: GPTBot\nDisallow: /caf\xe9/\nDisallow: /priv\n")
    (root / "2024-01-01" / "bom.example.txt").write_bytes(b"\xef\xbb\xbfUser-agent: CCBot\nDisallow: /\n")
    (root / "2024-01-01" / "notes.md").write_text("ignored")
    idx = OptOutIndex.load(root)
    assert idx.domains == 3
    assert idx.decision("https://junk.example/nocolon").allowed
    d = idx.decision("https://latin1.example/private")
    assert (d.allowed, d.agent) == (False, "GPTBot")
    assert idx.decision("https://latin1.example/public").allowed
    assert idx.decision("https://bom.example/").agent == "CCBot"  # BOM does not hide the first line


def test_jsonl_alternative_matches_folder(tmp_path: Path):
    rows = [{"domain": dom, "date": day, "robots": text}
            for day, files in SNAPSHOTS.items() for dom, text in files.items()]
    rows.append({"domain": "retro.example", "date": "2023-09-01", "robots": None})  # no file that day
    path = tmp_path / "robots.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    from_jsonl = OptOutIndex.load(path)
    from_folder = OptOutIndex.load(write_snapshots(tmp_path / "r"))
    assert from_jsonl.snapshots == from_folder.snapshots
    assert from_jsonl.domains == from_folder.domains
    assert from_jsonl.fingerprint == from_folder.fingerprint
    for url in ("https://retro.example/", "https://paths.example/private/a", "https://open.example/"):
        assert from_jsonl.decision(url) == from_folder.decision(url)


def test_input_errors(tmp_path: Path):
    with pytest.raises(InputError, match="do not exist"):
        OptOutIndex.load(tmp_path / "missing")
    (tmp_path / "bad" / "2024-13-01").mkdir(parents=True)
    with pytest.raises(InputError, match="calendar date"):
        OptOutIndex.load(tmp_path / "bad")
    (tmp_path / "bad2" / "latest").mkdir(parents=True)
    with pytest.raises(InputError, match="YYYY-MM-DD"):
        OptOutIndex.load(tmp_path / "bad2")
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"domain": "a.example", "date": "2024-01-01", "robots": 3}\n')
    with pytest.raises(InputError, match="bad.jsonl:1"):
        OptOutIndex.load(bad)


def test_url_without_host_is_a_record_error(index: OptOutIndex):
    for url in ("", "/just/a/path", "file:///tmp/x"):
        with pytest.raises(RecordError):
            index.decision(url)


def test_parser_exception_is_recorded_not_raised(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    import curation.steps.compliance.optout as optout

    real_parse = optout.Protego.parse

    def parse(content: str):
        if "BOOM" in content:
            raise ValueError("boom")
        return real_parse(content)

    monkeypatch.setattr(optout.Protego, "parse", staticmethod(parse))
    idx = OptOutIndex([("2024-01-01", "boom.example", b"BOOM"), ("2024-02-01", "boom.example", b"BOOM"),
                       ("2024-01-01", "fine.example", b"")], [])
    assert [(d, dom) for d, dom, _ in idx.parse_errors] == [("2024-01-01", "boom.example"),
                                                           ("2024-02-01", "boom.example")]
    assert idx.decision("https://boom.example/").allowed  # exclusion rule: no usable rules
    assert not idx.allowlisted("https://boom.example/")  # allow-list: not proven allowed
    assert idx.allowlisted("https://fine.example/")
