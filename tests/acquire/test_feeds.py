"""Threat feeds read for what they are: every format and its variants, compression by magic bytes,
detection, the plausibility rule, and that what a feed lists is blocked by `Guard.check` (the
resolver is a dictionary; nothing leaves loopback). The last tests read the real feeds in
../shared/data/blocklists when present."""
from __future__ import annotations

import bz2
import gzip
import ipaddress
import lzma
import typing
from urllib.parse import quote

import pyarrow as pa
import pytest

from curation.acquire.feeds import FEEDS_SCHEMA, PARSERS, Entries, feed_rows, read_feed
from curation.acquire.netguard import FEED_FORMATS, AccessLists, Guard, load_feeds
from curation.errors import InputError
from tests.conftest import SHARED_DATA


def parse(fmt: str, text: str) -> Entries:
    return Entries.collect(PARSERS[fmt](text.splitlines()))


def net(*cidrs):
    return {ipaddress.ip_network(c) for c in cidrs}


def prefixes(e: Entries) -> set[str]:
    return {str(p) for p in e.prefixes}


def test_hosts_file_variants():
    e = parse("hosts", """# hosts
0.0.0.0 a.test
127.0.0.1 b.test c.test   # two names, inline comment
:: d.test
::1 e.test
0.0.0.0 192.0.2.9
127.0.0.1 localhost
255.255.255.255 broadcasthost
fe80::1%lo0 localhost
f.test
0.0.0.0 Ｇ.test
no such line here
""")
    assert e.hosts == {"a.test", "b.test", "c.test", "d.test", "e.test", "f.test", "g.test"}
    assert e.networks == net("192.0.2.9/32")
    assert dict(e.skipped) == {"local_name": 3, "unrecognised": 1} and e.rule_lines == 11


def test_plain_domain_list_variants():
    e = parse("domains", "# list\na.test\n*.b.test\n.c.test\nd.test.\nbücher.test\n192.0.2.1\ne.test # note\n\nf g\n")
    assert e.hosts == {"a.test", "b.test", "c.test", "d.test", "xn--bcher-kva.test", "e.test"}
    assert e.networks == net("192.0.2.1/32") and dict(e.skipped) == {"unrecognised": 1}


def test_adblock_variants():
    e = parse("adblock", """[Adblock Plus 2.0]
! Title: test
# AdGuard comment
||a.test^
||b.test^$third-party,script,domain=x.test|y.test
||c.test/path/file.exe^$all
|http://d.test/x.php?id=1|
|https://e.test/dl/
||f.test:8080/p^
h.test
||192.0.2.7^
||192.0.2.8/bins/
0.0.0.0 j.test
@@||k.test^
example.test##.banner
##.ad
example.test#@#.ad
example.test#$#body { x: y }
||l.test^$removeparam=utm
||m.test^$badfilter
/ads[0-9]+/
||ads*.n.test^
-banner-ad-
http://o.test/x
""")
    assert e.hosts == {"a.test", "b.test", "h.test", "j.test"}
    assert e.networks == net("192.0.2.7/32")
    assert prefixes(e) == {"||c.test/path/file.exe^", "|d.test/x.php?id=1^", "|e.test/dl/", "||f.test/p^",
                           "||192.0.2.8/bins/"}
    assert dict(e.skipped) == {"exception_rule": 1, "cosmetic_rule": 4, "modifier_rule": 1, "badfilter_rule": 1,
                               "regex_rule": 1, "wildcard_host": 1, "substring_rule": 2}


def test_unbound_variants():
    e = parse("unbound", """# unbound blocklist
server:
  local-zone: "a.test." always_nxdomain
  local-zone: b.test refuse
  local-zone: "c.test" static   # comment
  local-zone: "d.test." redirect
  local-data: "d.test. A 0.0.0.0"
  local-data: "e.test. 3600 IN AAAA ::"
  local-zone: "f.test." transparent
  local-data-ptr: "192.0.2.1 g.test"
  local-zone: "h.test." made_up_type
  verbosity: 1
""")
    assert e.hosts == {"a.test", "b.test", "c.test", "d.test", "e.test"}
    assert dict(e.skipped) == {"non_blocking_zone": 1, "ptr_record": 1, "unrecognised": 1}


def test_rpz_variants():
    e = parse("rpz", """; policy zone
$TTL 300
$ORIGIN rpz.example.
@ IN SOA ns.example. admin.example. (
        2024010101 ; serial
        3600 600 86400 300 )
  IN NS ns.example.
a.test CNAME .
*.b.test CNAME .
c.test 300 IN CNAME *.
d.test.rpz.example. CNAME .
e.test CNAME rpz-passthru.
f.test A 0.0.0.0
g.test CNAME walled-garden.example.
24.0.2.0.192.rpz-ip CNAME .
128.1.zz.3.2.2001.rpz-ip CNAME rpz-drop.
ns.evil.test.rpz-nsdname CNAME .
$ORIGIN sub
h CNAME .
""")
    assert e.hosts == {"a.test", "b.test", "c.test", "d.test", "f.test", "g.test", "h.sub"}
    assert e.networks == net("192.0.2.0/24", "2001:2:3::1/128")
    assert dict(e.skipped) == {"passthru_rule": 1, "ns_or_client_trigger": 1}


def test_rpz_origin_from_an_absolute_soa_and_without_any_origin():
    absolute = parse("rpz", "rpz.local. 300 IN SOA localhost. root.localhost. 1 2 3 4 5\nrpz.local. NS localhost.\n"
                            "a.test.rpz.local. CNAME .\nb.test CNAME .\n")
    assert absolute.hosts == {"a.test", "b.test"}
    unknown = parse("rpz", "$TTL 30\n@ IN SOA localhost. root.localhost. 1 2 3 4 5\n NS localhost.\n\n"
                           "a.test CNAME .\nb.test.rpz.local. CNAME .\n")
    assert unknown.hosts == {"a.test"} and dict(unknown.skipped) == {"absolute_name_unknown_origin": 1}


def test_dnsmasq_variants():
    e = parse("dnsmasq", "# dnsmasq\naddress=/a.test/0.0.0.0\naddress=/b.test/c.test/\nlocal=/d.test/\n"
                         "server=/e.test/\nserver=/f.test/1.1.1.1\naddress=/#/0.0.0.0\ncache-size=100\n")
    assert e.hosts == {"a.test", "b.test", "c.test", "d.test", "e.test"}
    assert dict(e.skipped) == {"forward_rule": 1, "wildcard_all": 1}


def test_netsets_and_spamhaus_json():
    e = parse("netset", "#\n# FireHOL\n1.2.3.0/24\n5.6.7.8\n1.10.16.0/20 ; SBL256894\n; Spamhaus comment\n"
                        "9.9.9.1-9.9.9.3\n2001:db8::/32\n77.90.185.20\t10\nnot-an-address\n")
    assert e.networks == net("1.2.3.0/24", "5.6.7.8/32", "1.10.16.0/20", "9.9.9.1/32", "9.9.9.2/31",
                             "2001:db8::/32", "77.90.185.20/32")
    assert dict(e.skipped) == {"unrecognised": 1}
    j = parse("spamhaus_json", '{"cidr":"1.10.16.0/20","sblid":"SBL256894","rir":"apnic"}\n'
                               '{"cidr":"2001:db8::/32","sblid":"SBL1"}\n{"cidr": "bogus"}\n'
                               '{"type":"metadata","timestamp":1,"records":2}\n')
    assert j.networks == net("1.10.16.0/20", "2001:db8::/32") and j.rule_lines == 3
    assert dict(j.skipped) == {"unrecognised": 1}


def test_urlhaus_text_and_csv():
    e = parse("urlhaus", "# URLhaus\nhttps://a.test/login.php\nhttp://b.test/mal.exe\nhttp://192.0.2.5:8080/i\n"
                         "ftp://c.test/x\nhttp://d.test/a#frag\n")
    assert e.hosts == {"a.test"}  # an https indicator blocks its host
    assert prefixes(e) == {"|b.test/mal.exe^", "|192.0.2.5/i^", "|d.test/a^"}
    assert dict(e.skipped) == {"not_http": 1}
    csv_dump = parse("urlhaus_csv", """################################################################
# abuse.ch URLhaus Database Dump (CSV - recent URLs)           #
################################################################
#
# id,dateadded,url,url_status,last_online,threat,tags,urlhaus_link,reporter
"3229468","2024-10-09 12:07:07","http://117.215.210.133:45941/i","online","","malware_download","32-bit,elf,mips","https://urlhaus.abuse.ch/url/3229468/","geenensp"
"3229467","2024-10-09 12:06:07","https://bad.test/x.zip","offline","","malware_download","zip","https://urlhaus.abuse.ch/url/3229467/","r"
""")
    assert csv_dump.hosts == {"bad.test"} and prefixes(csv_dump) == {"|117.215.210.133/i^"}
    lookup = parse("urlhaus_csv", '"host","path","message","updated"\n"a.test","","m","t"\n'
                                  '"b.test","/x/y.pdf","m","t"\n')
    assert lookup.hosts == {"a.test"} and prefixes(lookup) == {"||b.test/x/y.pdf^"} and lookup.rule_lines == 2


DETECTED = {
    "netset": "# FireHOL\n1.2.3.0/24\n5.6.7.8\n",
    "spamhaus_json": '{"cidr":"1.10.16.0/20","sblid":"SBL1"}\n{"type":"metadata"}\n',
    "hosts": "# hosts\n0.0.0.0 a.test\n0.0.0.0 b.test\n",
    "domains": "a.test\nb.test\n*.c.test\n",
    "adblock": "! list\n||a.test^\n||b.test/x^$all\n",
    "unbound": 'server:\nlocal-zone: "a.test." always_nxdomain\n',
    "rpz": "$TTL 30\n@ SOA localhost. root.localhost. 1 2 3 4 5\n NS localhost.\na.test CNAME .\n",
    "dnsmasq": "address=/a.test/0.0.0.0\naddress=/b.test/0.0.0.0\n",
    "urlhaus": "# URLhaus\nhttp://a.test/x.exe\nhttps://b.test/\n",
    "urlhaus_csv": '# id,dateadded,url\n"1","2024-01-01","http://a.test/x"\n',
}


@pytest.mark.parametrize("fmt", sorted(DETECTED))
def test_each_format_is_detected(fmt):
    feed = read_feed("f", DETECTED[fmt].encode())
    assert (feed.format, feed.declared) == (fmt, "auto") and feed.entries.count() > 0
    assert "(detected)" in feed.summary()


def test_every_recipe_format_is_known_to_the_guard():
    from curation.recipe.schema import ThreatFeed
    assert set(typing.get_args(ThreatFeed.model_fields["format"].annotation)) == set(FEED_FORMATS)
    assert ThreatFeed(path="x").format == "auto" and set(DETECTED) | {"auto", "firehol", "spamhaus"} == set(FEED_FORMATS)


def test_legacy_names_read_their_variants():
    assert read_feed("d", b'{"cidr":"1.10.16.0/20"}\n', "spamhaus").format == "spamhaus_json"
    assert read_feed("d", b"1.10.16.0/20 ; SBL1\n", "spamhaus").format == "netset"
    assert read_feed("f", b"127.0.0.3/32\n", "firehol").format == "netset"


@pytest.mark.parametrize("pack", [gzip.compress, bz2.compress, lzma.compress,
                                  lambda b: gzip.compress(b[:20]) + gzip.compress(b[20:])])  # multi-member
def test_compression_is_found_by_its_bytes_not_the_name(tmp_path, pack):
    text = "".join(f"0.0.0.0 host{i}.test\n" for i in range(50)).encode()
    (tmp_path / "feed.txt").write_bytes(pack(text))            # compressed, named like text
    (tmp_path / "plain.gz").write_bytes(text)                 # plain, named like gzip
    lists = load_feeds([{"path": str(tmp_path / "feed.txt")}, {"path": str(tmp_path / "plain.gz")}])
    packed, plain = lists.feeds
    assert packed["compression"] in ("gzip", "bzip2", "xz") and plain["compression"] is None
    assert packed["hosts"] == plain["hosts"] == 50 and packed["format"] == plain["format"] == "hosts"


def test_damaged_and_unreadable_containers_are_refused():
    text = gzip.compress(b"0.0.0.0 a.test\n" * 1000)
    with pytest.raises(InputError, match="gzip data is damaged or truncated"):
        read_feed("cut.gz", text[: len(text) // 2])
    with pytest.raises(InputError, match="zip archive"):
        read_feed("f.zip", b"PK\x03\x04rest")
    with pytest.raises(InputError, match="binary data"):
        read_feed("f.bin", b"0.0.0.0 a.test\n\x00\x01\x02")
    utf16 = read_feed("hosts-utf16", "0.0.0.0 a.test\r\n0.0.0.0 b.test\r\n".encode("utf-16"))
    assert utf16.entries.hosts == {"a.test", "b.test"}


def test_a_feed_that_blocks_nothing_is_an_error_naming_it_and_the_fix():
    with pytest.raises(InputError, match=r"threat feed ads\.txt: no known format reads it"):
        read_feed("ads.txt", b"<!doctype html><html><body>Rate limit exceeded</body></html>\n")
    with pytest.raises(InputError, match="has no rules at all"):
        read_feed("empty.netset", b"#\n# FireHOL empty set\n#\n")
    with pytest.raises(InputError, match=r"read as urlhaus \(declared\) is implausible: no entries.*"
                                         r"reads as adblock: declare `format: adblock`"):
        read_feed("urlhaus-filter.txt", b"! Title: x\n||a.test^\n||b.test/x^$all\n", "urlhaus")
    with pytest.raises(InputError, match=r"read as hosts \(declared\).*reads as unbound"):
        read_feed("unbound.conf", b'server:\nlocal-zone: "a.test." always_nxdomain\n'
                                  b'local-zone: "b.test." always_nxdomain\n', "hosts")
    junk = "".join(f"10.0.{i}.0/24\n" for i in range(8)) + "garbage\nmore garbage\n"
    with pytest.raises(InputError, match="2 of 10 rule lines unreadable"):
        read_feed("mixed.netset", junk.encode(), "netset")
    with pytest.raises(InputError, match="unknown format 'csv'"):
        read_feed("x", b"a.test\n", "csv")


def test_mostly_non_blocking_rules_are_implausible_unless_the_feed_allows_it():
    text = ("||a.test^\n||b.test^\n" + "".join(f"site{i}.test##.ad\n" for i in range(8))).encode()
    with pytest.raises(InputError, match=r"only 2 of 10 rule lines block anything.*min_entry_share"):
        read_feed("cosmetic.txt", text, "adblock")
    with pytest.raises(InputError, match="no entries"):
        read_feed("exceptions.txt", b"@@||a.test^\n@@||b.test^\n", "adblock", min_entry_share=0)
    feed = read_feed("cosmetic.txt", text, "adblock", min_entry_share=0.2)
    assert feed.entries.hosts == {"a.test", "b.test"} and feed.entries.skipped == {"cosmetic_rule": 8}


HOSTS = [f"h{i:04d}.bad{i % 7}.test" for i in range(500)]
SYNTAXES = {
    "unbound": "server:\n" + "".join(f'  local-zone: "{h}." always_nxdomain\n' for h in HOSTS),
    "rpz": "$TTL 30\n$ORIGIN rpz.test.\n@ SOA localhost. root.localhost. 1 2 3 4 5\n NS localhost.\n" +
           "".join(f"{h} CNAME .\n" if i % 2 else f"{h}.rpz.test. CNAME .\n" for i, h in enumerate(HOSTS)),
    "adblock": "! list\n" + "".join(f"||{h}^$all\n" for h in HOSTS),
    "dnsmasq": "".join(f"address=/{h}/0.0.0.0\n" for h in HOSTS),
    "hosts": "".join(f"0.0.0.0 {h}\n" for h in HOSTS),
}


@pytest.mark.parametrize("fmt", sorted(SYNTAXES))
def test_every_listed_host_is_blocked_and_never_resolved(fmt):
    resolved = []
    guard = Guard(AccessLists.compile([(f"{fmt}.feed", "auto", gzip.compress(SYNTAXES[fmt].encode()))]),
                  resolver=lambda h: resolved.append(h) or ["127.0.0.2"])
    assert guard.lists.feeds[0]["format"] == fmt
    for h in HOSTS:
        assert guard.check(f"http://{h}/x").reason == "domain_blocked", h
        assert guard.check(f"https://cdn.{h}:8443/").reason == "domain_blocked", h
    assert resolved == []
    assert guard.check("http://h0000.bad0.test.example/").allowed  # a suffix match, not a substring one


def test_url_prefix_rules():
    feeds = [("ab", "adblock", "||c.test/path/file.exe^$all\n|http://d.test/dl/\n||192.0.2.8/bins/\n"),
             ("uh", "urlhaus", "http://e.test/a.php?id=1\n")]
    guard = Guard(AccessLists.compile(feeds), resolver={"c.test": ["127.0.0.2"], "sub.c.test": ["127.0.0.2"],
                                                        "d.test": ["127.0.0.2"], "x.d.test": ["127.0.0.2"],
                                                        "e.test": ["127.0.0.2"], "alias.test": ["192.0.2.8"]}.__getitem__)
    blocked = ["http://c.test/path/file.exe", "https://c.test/path/file.exe?x=1", "http://sub.c.test/path/file.exe",
               "http://c.test:8080/path/%66ile.exe", "http://c.test/a/../path/file.exe", "http://C.TEST/PATH/FILE.EXE",
               "http://d.test/dl/tool.bin", "http://192.0.2.8/bins/mips", "http://alias.test/bins/arm7",
               "http://[::ffff:192.0.2.8]/bins/x", "http://e.test/a.php?id=1", "http://e.test/a.php?id=1&b=2"]
    for url in blocked:
        assert guard.check(url).reason == "url_blocked", url
    for url in ["http://c.test/path/file.exe2", "http://c.test/other", "http://x.d.test/dl/tool.bin",
                "http://alias.test/other", "http://e.test/a.php?id=10", "http://e.test/a.php"]:
        assert guard.check(url).allowed, url


def test_feed_rows_for_the_ledger(tmp_path):
    (tmp_path / "a.rpz").write_text(SYNTAXES["rpz"])
    (tmp_path / "b.txt").write_bytes(gzip.compress(DETECTED["adblock"].encode() + b"@@||x.test^\n"))
    lists = load_feeds([{"path": str(tmp_path / "a.rpz"), "name": "feeds/a.rpz"},
                        {"path": str(tmp_path / "b.txt"), "name": "https://lists.test/b.txt", "format": "adblock"}])
    record = {"feeds": lists.feeds}
    rows = feed_rows("run1", [record, record, None])  # two URL sources checked against the same feeds
    table = pa.Table.from_pylist(rows, schema=FEEDS_SCHEMA)
    assert table.num_rows == 2
    assert [(r["feed"], r["format"], r["declared_format"], r["hosts"], r["url_prefixes"], r["skipped_lines"])
            for r in rows] == [("feeds/a.rpz", "rpz", "auto", 500, 0, 0),
                               ("https://lists.test/b.txt", "adblock", "adblock", 1, 1, 1)]
    assert rows[1]["compression"] == "gzip" and rows[1]["skipped"] == "exception_rule 1"


# -- the real feeds in ../shared/data/blocklists -----------------------------------------------------
BLOCKLISTS = SHARED_DATA / "blocklists"
REAL = {  # file: (detected format, networks, hosts, URL prefixes) as measured on the snapshot
    "firehol/firehol_level1.netset": ("netset", 4631, 0, 0),
    "firehol/firehol_level2.netset": ("netset", 17924, 0, 0),
    "firehol/spamhaus_drop.netset": ("netset", 1599, 0, 0),
    "firehol/feodo.ipset": ("netset", 1, 0, 0),
    "ipsum/ipsum.txt.gz": ("netset", 120430, 0, 0),
    "spamhaus/drop_v4.json": ("spamhaus_json", 1669, 0, 0),
    "spamhaus/spamhaus_drop_list.txt": ("netset", 1669, 0, 0),
    "urlhaus/urlhaus-filter-hosts.txt": ("hosts", 0, 2689, 0),
    "urlhaus/urlhaus-filter-domains.txt": ("domains", 23079, 2689, 0),
    "urlhaus/urlhaus-filter-wildcard.txt": ("domains", 23079, 2689, 0),
    "urlhaus/urlhaus-filter-agh.txt": ("adblock", 23079, 2689, 0),
    "urlhaus/urlhaus-filter-online.txt": ("adblock", 2234, 620, 3509),
    "urlhaus/urlhaus-filter-rpz.conf": ("rpz", 0, 2689, 0),
    "urlhaus/urlhaus-filter-dnsmasq.conf": ("dnsmasq", 0, 2689, 0),
    "urlhaus/urlhaus-filter-splunk-online.csv.gz": ("urlhaus_csv", 2234, 620, 3509),
}
needs_real = pytest.mark.skipif(not BLOCKLISTS.is_dir(), reason=f"{BLOCKLISTS} is absent (real feed snapshots)")


@pytest.mark.slow
@needs_real
@pytest.mark.shared_data
@pytest.mark.parametrize("name", sorted(REAL))
def test_real_feeds_are_read_whole_and_what_they_list_is_blocked(name):
    feed = read_feed(name, (BLOCKLISTS / name).read_bytes())
    e = feed.entries
    assert (feed.format, len(e.networks), len(e.hosts), len(e.prefixes)) == REAL[name], feed.summary()
    assert e.skipped.get("unrecognised", 0) == 0 and e.entry_lines == e.rule_lines, feed.summary()
    sampled = sorted(e.networks, key=str)[:: max(1, len(e.networks) // 2000)]
    probes = {f"p{i}.probe.example": [str(n[-1])] for i, n in enumerate(sampled)}  # names resolving into each
    guard = Guard(AccessLists.from_feeds([feed]), resolver=lambda h: probes.get(h, ["127.0.0.2"]))
    for host in sorted(e.hosts):
        assert guard.check(f"http://{host}/").reason == "domain_blocked", host
    for probe, network in zip(probes, sampled):
        assert guard.check(f"http://{probe}/").reason == "ip_blocked", network
    for rule in sorted(e.prefixes):
        host = f"[{rule.host}]" if ":" in rule.host else rule.host
        url = f"https://{host}{quote(rule.path, safe='/?=&;:@+,')}"  # rule paths are held percent-decoded
        assert guard.check(url).reason in ("url_blocked", "ip_blocked"), rule


@pytest.mark.slow
@needs_real
@pytest.mark.shared_data
def test_one_list_in_every_syntax_blocks_the_same():
    """urlhaus-filter publishes one list in several syntaxes: each reading must find the same entries."""
    read = {n: read_feed(n, (BLOCKLISTS / n).read_bytes()).entries for n in REAL if n.startswith("urlhaus/")}
    same = [["urlhaus/urlhaus-filter-hosts.txt", "urlhaus/urlhaus-filter-rpz.conf", "urlhaus/urlhaus-filter-dnsmasq.conf"],
            ["urlhaus/urlhaus-filter-domains.txt", "urlhaus/urlhaus-filter-wildcard.txt", "urlhaus/urlhaus-filter-agh.txt"],
            ["urlhaus/urlhaus-filter-online.txt", "urlhaus/urlhaus-filter-splunk-online.csv.gz"]]
    for group in same:
        assert all(read[n].same(read[group[0]]) for n in group), group
    assert read[same[0][0]].hosts == read[same[1][0]].hosts  # the hosts file leaves out the IP hosts only
