"""Network safeguards against real HTTP servers on 127.0.0.0/8: the servers' own logs prove that no
request reached a blocked destination. No traffic leaves loopback."""
from __future__ import annotations

import time

import pytest

from curation.acquire.fetch import Fetcher, FetchPolicy
from curation.acquire.netguard import AccessLists, Guard
from tests.loopback import Server


def ok(body=b"payload"):
    return lambda s: (200, {}, body)


def redirect(to):
    return lambda s: (302, {"Location": to}, b"")


@pytest.fixture
def servers():
    good = Server("127.0.0.2", {})
    blocked = Server("127.0.0.3", {"/payload": ok(b"SECRET"), "/x": ok(b"SECRET")})
    yield good, blocked
    good.close()
    blocked.close()


FEEDS = [("firehol_level1.netset", "firehol", "# FireHOL\n127.0.0.3/32\n10.0.0.0/8\n"),
         ("drop.txt", "spamhaus", "; Spamhaus DROP\n192.0.2.0/24 ; SBL1\n"),
         ("urlhaus.txt", "urlhaus", "# URLhaus\nhttps://phish.test/login.php\nhttp://good.test/malware.exe\n"),
         ("hosts", "hosts", "127.0.0.1 localhost\n0.0.0.0 bad.test\n")]


def make(resolve: dict[str, list[str]] | None = None, **policy):
    calls = []

    def resolver(host):
        calls.append(host)
        if resolve and host in resolve:
            return resolve[host]
        raise OSError("name not known (test resolver)")

    sleeps = []
    guard = Guard(AccessLists.compile(FEEDS), resolver=resolver)
    fetcher = Fetcher(guard, FetchPolicy(**{"timeout_s": 2, "max_retries": 2, **policy}), sleep=sleeps.append)
    return fetcher, calls, sleeps


def test_redirect_chain_into_a_blocked_network_stops_before_connecting(servers):
    good, blocked = servers
    good.routes.update({"/r1": redirect(f"{good.base}/r2"), "/r2": redirect(f"{blocked.base}/payload")})
    fetcher, _, _ = make()
    result, body = fetcher.fetch(f"{good.base}/r1")
    assert (result.status, result.reason) == ("refused", "ip_blocked") and body is None
    assert result.attempts == 1  # refused: never retried
    assert good.paths() == ["/r1", "/r2"]
    assert blocked.log == []  # the blocked server never saw a request


def test_a_name_resolving_to_a_blocked_address_is_refused(servers):
    good, blocked = servers
    good.routes["/ok"] = ok()
    fetcher, calls, _ = make({"evil.test": ["127.0.0.3"], "good.example": ["127.0.0.2"]})
    refused, _ = fetcher.fetch(f"http://evil.test:{blocked.port}/x")
    assert (refused.status, refused.reason) == ("refused", "ip_blocked")
    fine, body = fetcher.fetch(f"http://good.example:{good.port}/ok")
    assert fine.status == "ok" and body == b"payload"
    assert good.log == [("/ok", f"good.example:{good.port}")]  # connected to the checked address, Host kept
    assert blocked.log == []
    assert calls.count("evil.test") == 1


def test_domain_url_and_scheme_rules(servers):
    good, blocked = servers
    good.routes["/malware.exe"] = ok()
    good.routes["/other.exe"] = ok()
    fetcher, calls, _ = make({"good.test": ["127.0.0.2"], "phish.test": ["127.0.0.2"],
                              "a.bad.test": ["127.0.0.2"], "bad.test": ["127.0.0.2"]})
    cases = {
        f"http://bad.test:{good.port}/": "domain_blocked",
        f"http://a.bad.test:{good.port}/": "domain_blocked",            # subdomains of a listed domain
        f"http://phish.test:{good.port}/anything": "domain_blocked",    # https indicator -> whole host
        "http://good.test/malware.exe": "url_blocked",                  # http indicator -> that URL
        "file:///etc/passwd": "scheme_refused",
        "ftp://good.test/x": "scheme_refused",
        "gopher://127.0.0.2/": "scheme_refused",
        f"http://192.0.2.7:{good.port}/": "ip_blocked",                 # Spamhaus DROP, literal address
        "http://[::ffff:127.0.0.3]/": "ip_blocked",                     # IPv4-mapped IPv6 is the same host
        "http://unknown.test/": "dns_failed",
    }
    for url, reason in cases.items():
        result, _ = fetcher.fetch(url)
        assert (result.status, result.reason) == ("refused", reason), url
    assert "bad.test" not in calls and "phish.test" not in calls  # listed names are never even resolved
    other, _ = fetcher.fetch(f"http://good.test:{good.port}/other.exe")
    assert other.status == "ok"
    assert blocked.log == [] and good.paths() == ["/other.exe"]


def test_transient_errors_are_retried_with_backoff_and_bounded(servers):
    good, _ = servers
    state = {"n": 0}

    def flaky(s):
        state["n"] += 1
        if state["n"] == 1:
            return 429, {"Retry-After": "3"}, b""
        return (503, {}, b"") if state["n"] == 2 else (200, {}, b"finally")

    good.routes["/flaky"] = flaky
    good.routes["/down"] = lambda s: (503, {}, b"")
    good.routes["/missing"] = lambda s: (404, {}, b"")
    fetcher, _, sleeps = make()
    result, body = fetcher.fetch(f"{good.base}/flaky")
    assert (result.status, result.attempts, body) == ("ok", 3, b"finally")
    assert sleeps == [3.0, 1.0]  # Retry-After honoured, then exponential backoff (0.5 * 2)
    down, _ = fetcher.fetch(f"{good.base}/down")
    assert (down.status, down.reason, down.attempts) == ("failed", "http_503", 3)
    assert good.paths().count("/down") == 3  # max_retries=2: three requests, no more
    missing, _ = fetcher.fetch(f"{good.base}/missing")
    assert (missing.reason, missing.attempts) == ("http_404", 1)  # not transient: no retry


def test_slow_server_times_out_and_large_bodies_are_cut(servers):
    good, _ = servers

    def slow(s):
        time.sleep(1.0)
        return 200, {}, b"late"

    good.routes["/slow"] = slow
    good.routes["/big"] = ok(b"x" * 5000)
    fetcher, _, _ = make(timeout_s=0.2, max_retries=1, max_bytes=1000)
    result, _ = fetcher.fetch(f"{good.base}/slow")
    assert (result.status, result.reason, result.attempts) == ("failed", "timeout", 2)
    big, _ = fetcher.fetch(f"{good.base}/big")
    assert (big.status, big.reason) == ("failed", "too_large")


def test_too_many_redirects(servers):
    good, _ = servers
    good.routes["/loop"] = redirect("/loop")
    fetcher, _, _ = make(max_redirects=3)
    result, _ = fetcher.fetch(f"{good.base}/loop")
    assert result.reason == "too_many_redirects" and good.paths() == ["/loop"] * 4


def test_fetch_all_limits_per_host_concurrency_and_resumes(servers, tmp_path):
    good, blocked = servers

    def slowish(s):
        time.sleep(0.15)
        return 200, {}, b"doc"

    for i in range(6):
        good.routes[f"/d{i}"] = slowish
    good.routes["/gone"] = lambda s: (503, {}, b"")
    urls = [f"{good.base}/d{i}" for i in range(6)] + [f"{blocked.base}/x", f"{good.base}/gone"]
    fetcher, _, _ = make(per_host=2, workers=6, max_retries=0)
    first = fetcher.fetch_all(urls, tmp_path / "raw")
    assert [r.status for r in first] == ["ok"] * 6 + ["refused", "failed"]
    assert good.max_inflight <= 2
    assert all((tmp_path / "raw" / r.file).read_bytes() == b"doc" for r in first[:6])
    requests_before = len(good.log)
    second = fetcher.fetch_all(urls, tmp_path / "raw")
    assert [r.status for r in second] == [r.status for r in first]
    assert good.paths()[requests_before:] == ["/gone"]  # only the failed URL is tried again
    assert blocked.log == []


def test_equivalent_spellings_of_blocked_hosts_are_refused(servers):
    good, blocked = servers
    feeds = [("hosts", "hosts", "0.0.0.0 bad.test\n0.0.0.0 bücher.test\n"),
             ("urlhaus.txt", "urlhaus", "https://127.0.0.3/x\nhttp://good.test/a;b=1\n"),
             ("firehol.netset", "firehol", "127.0.0.3/32\n")]
    resolver = {"2130706435": ["127.0.0.3"], "good.test": ["127.0.0.2"]}  # as getaddrinfo answers
    guard = Guard(AccessLists.compile(feeds), resolver=lambda h: resolver[h])
    cases = {
        "http://ｂａｄ.test/": "domain_blocked",                 # full-width letters map to bad.test
        "http://bad。test/": "domain_blocked",                   # ideographic full stop
        "http://xn--bcher-kva.test/": "domain_blocked",          # bücher.test, as DNS spells it
        "http://BAD.TEST./x": "domain_blocked",
        "http://2130706435/": "ip_blocked",                      # integer spelling of 127.0.0.3
        "http://[64:ff9b::7f00:3]/": "ip_blocked",                # NAT64 carrying 127.0.0.3
        "http://[2002:7f00:3::1]/": "ip_blocked",                 # 6to4 carrying 127.0.0.3
        "http://user:secret@good.test/": "userinfo_refused",
        "http://good.test/a;b=1": "url_blocked",                 # ';' belongs to the URL in URL lists
    }
    for url, reason in cases.items():
        assert guard.check(url).reason == reason, url
    assert guard.check("http://good.test/a").allowed


def test_bad_redirects_and_repeated_urls(servers, tmp_path):
    good, _ = servers
    good.routes["/bad-host"] = lambda s: (302, {"Location": "http://[::1/x"}, b"")
    good.routes["/caf%C3%A9"] = ok(b"unicode path")  # the percent-encoded form the client must send
    good.routes["/to-cafe"] = lambda s: (302, {"Location": "/café"}, b"")
    good.routes["/once"] = ok(b"one")
    fetcher, _, _ = make()
    bad, _ = fetcher.fetch(f"{good.base}/bad-host")
    assert (bad.status, bad.reason) == ("failed", "bad_redirect")
    cafe, body = fetcher.fetch(f"{good.base}/to-cafe")
    assert cafe.status == "ok" and body == b"unicode path"
    assert "/caf%C3%A9" in good.paths()
    results = fetcher.fetch_all([f"{good.base}/once"] * 3, tmp_path / "raw")
    assert [r.status for r in results] == ["ok"] * 3 and good.paths().count("/once") == 1
