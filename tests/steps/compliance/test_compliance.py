"""Licence policy, retroactive opt-out and PII through a real run: decisions and counts in the ledger."""
from __future__ import annotations

import pytest

from curation.core.record import Record
from curation.steps.compliance.licences import LicencePolicy, licence_class
from tests.conftest import VOCAB, english_doc, write_jsonl


@pytest.mark.parametrize("text, cls", [
    ("MIT", "permissive"), ("cc-by-4.0", "permissive"), ("ODC-By-1.0", "permissive"),
    ("CC-BY-SA-4.0", "share-alike"), ("GPL v3", "share-alike"), ("ODbL-1.0", "share-alike"),
    ("CC BY-NC-SA 4.0", "non-commercial"), ("for research purposes only", "research-only"),
    ("CC-BY-ND-4.0", "no-derivatives"), ("CC BY-ND 4.0", "no-derivatives"), ("CC BY-NC-ND 4.0", "non-commercial"),
    ("Llama 2 Community License", "unknown"), ("", "unknown"), (None, "unknown")])
def test_licence_classes(text, cls):
    assert licence_class(text) == cls


def test_record_licence_field_overrides_the_source_class():
    step = LicencePolicy("permissive", ["non-commercial", "share-alike"], field="license", source="s")
    records = [Record("a", "s", "x", {"license": "CC-BY-NC-4.0"}), Record("b", "s", "x", {"license": "MIT"}),
               Record("c", "s", "x", {}), Record("d", "s", "x", {"license": "CC-BY-SA-4.0"})]
    assert [r.id for r in step.run(records)] == ["b", "c"]
    assert dict(step.stats.dropped) == {"licence_non-commercial": 1, "licence_share-alike": 1}


def test_composite_collection_keeps_approved_constituents():
    from curation.steps.compliance.licences import ApprovedConstituents
    step = ApprovedConstituents("subset", ["wiki", "books"], source="s")
    records = [Record(str(i), "s", "x", {"subset": sub}) for i, sub in enumerate(["wiki", "forum", None, "books"])]
    assert [r.id for r in step.run(records)] == ["0", "3"]
    assert dict(step.stats.dropped) == {"constituent_not_approved": 2}


@pytest.mark.slow
def test_compliance_end_to_end(tmp_path):
    from curation.commands.run import run

    docs = lambda prefix, n, **meta: [{"id": f"{prefix}{i}", "text": english_doc(i), **meta} for i in range(n)]  # noqa: E731
    write_jsonl(tmp_path / "nc.jsonl", docs("nc", 3))
    mixed = docs("m", 4, url="https://old.example.org/page")
    mixed[0]["license"] = "CC-BY-NC-4.0"
    mixed[1]["url"] = "https://www.optout.example/story"      # crawled long ago, opted out in 2025
    mixed[2]["text"] += " Write to jane.doe@example.com or call +41 44 668 18 00."
    mixed[3]["url"] = "https://forum.optout.example/t/1"   # a subdomain: the registrable domain opted out
    write_jsonl(tmp_path / "mixed.jsonl", mixed)
    for date, robots in (("2021-01-01", "User-agent: *\nAllow: /\n"),
                         ("2025-01-01", "User-agent: ClaudeBot\nDisallow: /\n")):
        (tmp_path / "robots" / date).mkdir(parents=True)
        (tmp_path / "robots" / date / "optout.example.txt").write_text(robots)
    (tmp_path / "recipe.yaml").write_text(f"""name: t
vocabulary: {VOCAB}
optout: {{snapshots: robots}}
sources:
  - name: nc
    license: CC-BY-NC-4.0
    input: {{paths: [nc.jsonl], id_field: id}}
  - name: mixed
    license: MIT
    licence_field: license
    pii: {{}}
    input: {{paths: [mixed.jsonl], id_field: id, metadata_fields: [url, license]}}
""")
    res = run(tmp_path / "recipe.yaml", tmp_path / "out", progress=False)
    sources = {s["source"]: s for s in res.rows["sources"]}
    assert sources["nc"]["licence_class"] == "non-commercial"
    assert sources["nc"]["licence_decision"] == "excluded (non-commercial)"
    drops = {(d["source"], d["step"], d["reason"]): d["records"] for d in res.rows["drops"]}
    assert drops[("nc", "licence", "licence_non-commercial")] == 3
    assert drops[("mixed", "licence", "licence_non-commercial")] == 1
    assert drops[("mixed", "robots_optout", "robots_opt_out")] == 2
    assert sources["mixed"]["optout_mode"] == "robots.txt (page URL; host and registrable domain)"
    tokens = {t["source"]: t["documents"] for t in res.rows["tokens"]}
    assert tokens == {"nc": 0, "mixed": 1}
    assert {(p["source"], p["kind"]): p["replaced"] for p in res.rows["pii"]} == {
        ("mixed", "email"): 1, ("mixed", "phone"): 1}
    optout = {o["source"]: o for o in res.rows["optout"]}
    assert (optout["mixed"]["removed"], optout["mixed"]["with_url"]) == (2, 3)
    report = (tmp_path / "out" / "reports" / "report.md").read_text()
    assert "Licences and provenance" in report and "robots.txt opt-out" in report and "PII replaced" in report
