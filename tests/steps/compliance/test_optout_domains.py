"""Opt-out by registrable domain (`optout.match`): which robots.txt snapshots govern a URL, on the
subdomain shapes of real crawls (forums under stackexchange.com, language editions of wikipedia.org,
baike.baidu.com), multi-label public suffixes, private suffixes and IP addresses."""
from __future__ import annotations

import pytest

from curation.errors import RecipeError
from curation.steps.compliance.domains import registrable_domain
from curation.steps.compliance.optout import OptOutIndex

OFF = b"User-agent: GPTBot\nDisallow: /\n"
OPEN = b"User-agent: *\nAllow: /\n"


@pytest.fixture()
def index() -> OptOutIndex:
    return OptOutIndex([("2024-06-01", "stackexchange.com", OFF), ("2024-06-01", "www.wikipedia.org", OFF),
                        ("2024-06-01", "baidu.com", OFF), ("2024-06-01", "bbc.co.uk", OFF),
                        ("2024-06-01", "foo.github.io", OFF), ("2024-06-01", "forum.open.org", OFF),
                        ("2024-06-01", "open.org", OPEN)], ["2024-06-01"])


@pytest.mark.parametrize("host, want", [
    ("a.stackexchange.com", "stackexchange.com"), ("uk.wikipedia.org", "wikipedia.org"),
    ("baike.baidu.com", "baidu.com"), ("news.bbc.co.uk", "bbc.co.uk"),
    ("bar.github.io", "bar.github.io"),          # a private suffix: each user's site is its own domain
    ("co.uk", None), ("127.0.0.1", None), ("[::1]", None), ("localhost", None)])
def test_registrable_domain(host, want):
    assert registrable_domain(host) == want


@pytest.mark.parametrize("url, domain", [
    ("https://math.stackexchange.com/questions/1", "stackexchange.com"),
    ("https://uk.wikipedia.org/wiki/Kyiv", "www.wikipedia.org"),      # the registrable domain's www. snapshot
    ("http://baike.baidu.com/item/x", "baidu.com"),
    ("https://www.news.bbc.co.uk/a", "bbc.co.uk")])
def test_subdomains_of_an_opted_out_registrable_domain_are_excluded(index, url, domain):
    d = index.decision(url, "both")
    assert (d.allowed, d.domain, d.agent) == (False, domain, "GPTBot")
    assert index.decision(url, "registrable_domain").allowed is False
    assert index.decision(url, "host").allowed            # the old rule kept them: exact host and www. only


def test_a_subdomains_own_opt_out_still_counts_and_private_suffixes_stay_apart(index):
    assert not index.decision("https://forum.open.org/t", "both").allowed      # its own snapshot says no
    assert index.decision("https://forum.open.org/t", "registrable_domain").allowed   # open.org allows
    assert not index.decision("https://foo.github.io/x", "both").allowed
    assert index.decision("https://bar.github.io/x", "both").allowed           # another user's site
    assert index.decision("http://127.0.0.1/x", "both").allowed                # no registrable domain


def test_the_rule_is_a_recipe_setting_with_a_default(tmp_path):
    from curation.recipe.load import load_recipe
    from tests.conftest import VOCAB, write_jsonl
    write_jsonl(tmp_path / "a.jsonl", [{"id": "1", "text": "x"}])
    (tmp_path / "robots" / "2024-01-01").mkdir(parents=True)
    body = f"name: x\nvocabulary: {VOCAB}\noptout: {{snapshots: robots%s}}\nsources:\n  - name: a\n" \
           f"    license: MIT\n    input: {{paths: [a.jsonl]}}\n"
    p = tmp_path / "x.yaml"
    p.write_text(body % "")
    assert load_recipe(p, resolve_inputs=False).recipe.optout.match == "both"
    p.write_text(body % ", match: host")
    assert load_recipe(p, resolve_inputs=False).recipe.optout.match == "host"
    p.write_text(body % ", match: subdomain")
    with pytest.raises(RecipeError, match="match"):
        load_recipe(p, resolve_inputs=False)
