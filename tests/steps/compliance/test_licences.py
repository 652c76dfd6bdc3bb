"""Licence classification fails closed: a table of real licence strings, structured per-record licence
fields, and the policy's decision and wording."""
from __future__ import annotations

import gzip
import json

import pytest

from curation.core.record import Record
from curation.steps.compliance.licence_fields import ABSENT, field_value, licences_in
from curation.steps.compliance.licence_text import LICENCE_CLASSES, classify
from curation.steps.compliance.licences import (
    DEFAULT_EXCLUDED,
    UNKNOWN_ADMITTED,
    LicencePolicy,
    licence_decision,
)
from tests.conftest import SHARED_DATA

# Strings as they appear in SPDX data, Hugging Face dataset cards, Common Crawl licence tags, C5
# abbreviations, web page footers and dataset READMEs.
TABLE = [
    # SPDX ids and expressions
    ("MIT", "permissive"), ("Apache-2.0", "permissive"), ("BSD-3-Clause", "permissive"),
    ("GPL-2.0-only", "share-alike"), ("GPL-3.0-or-later", "share-alike"), ("GPL-2.0+", "share-alike"),
    ("LGPL-2.1-or-later", "share-alike"), ("AGPL-3.0-only", "share-alike"), ("MPL-2.0", "share-alike"),
    ("GPL-2.0-only WITH Classpath-exception-2.0", "share-alike"), ("Apache-2.0 WITH LLVM-exception", "permissive"),
    ("MIT OR Apache-2.0", "permissive"), ("GPL-3.0-only OR MIT", "permissive"),
    ("MIT AND CC-BY-NC-4.0", "non-commercial"), ("(MIT OR GPL-3.0-only) AND CC-BY-SA-4.0", "share-alike"),
    ("MIT AND LicenseRef-custom-terms", "unknown"), ("CC-BY-4.0 OR LicenseRef-x", "permissive"),
    ("ODbL-1.0", "share-alike"), ("ODC-By-1.0", "permissive"), ("PDDL-1.0", "permissive"),
    ("CC0-1.0", "permissive"), ("OGL-UK-3.0", "permissive"), ("CDLA-Sharing-1.0", "share-alike"),
    ("CDLA-Permissive-2.0", "permissive"), ("EUPL-1.2", "share-alike"), ("GFDL-1.3-or-later", "share-alike"),
    ("BUSL-1.1", "unknown"),
    # Creative Commons: SPDX, versions, ports, words, URLs, Common Crawl tags, C5 abbreviations
    ("CC-BY-NC-SA-4.0", "non-commercial"), ("cc-by-sa-3.0-de", "share-alike"),
    ("CC-BY-NC-SA-2.0-UK", "non-commercial"), ("CC BY-NC 2.0", "non-commercial"), ("CC BY-ND 4.0", "no-derivatives"),
    ("CC BY-NC-ND 4.0", "non-commercial"), ("CC BY 4.0", "permissive"), ("CC BY-SA 3.0 IGO", "share-alike"),
    ("https://creativecommons.org/licenses/by-nd/4.0/", "no-derivatives"),
    ("http://creativecommons.org/licenses/by-nc-sa/3.0/es/deed.es", "non-commercial"),
    ("https://creativecommons.org/licenses/by/4.0/legalcode", "permissive"),
    ("https://creativecommons.org/publicdomain/zero/1.0/", "permissive"),
    ("https://creativecommons.org/publicdomain/mark/1.0/", "permissive"),
    ("Creative Commons Attribution-NonCommercial-ShareAlike 4.0 International", "non-commercial"),
    ("Creative Commons Attribution-NoDerivatives 4.0 International License", "no-derivatives"),
    ("Attribution-ShareAlike 3.0 Unported (CC BY-SA 3.0)", "share-alike"),
    ("Creative Commons Attribution 4.0 International", "permissive"),
    ("CC0", "permissive"), ("cc0-1.0", "permissive"), ("Public Domain Mark 1.0", "permissive"),
    ("This work is in the public domain.", "permissive"),
    ("cc_re__cc_re__cc_by_nc_sa_3_0_es", "non-commercial"), ("cc_re__cc_re__cc_publicdomain_zero_1_0", "permissive"),
    ("cc_re__cc_re__cc_by_sa_3_0", "share-alike"), ("by-nc-nd", "non-commercial"), ("by", "permissive"),
    ("zero", "permissive"), ("cc-unknown", "unknown"), ("cc", "unknown"), ("Creative Commons", "unknown"),
    # Hugging Face card ids
    ("apache-2.0", "permissive"), ("cc-by-nc-4.0", "non-commercial"), ("odc-by", "permissive"),
    ("odbl", "share-alike"), ("gpl-3.0", "share-alike"), ("lgpl", "share-alike"), ("openrail", "unknown"),
    ("bigscience-openrail-m", "unknown"), ("llama2", "unknown"), ("other", "unknown"),
    ("h-research", "research-only"), ("c-uda", "unknown"), ("fair-noncommercial-research-license", "research-only"),
    # licences in words
    ("The MIT License", "permissive"), ("Apache License, Version 2.0", "permissive"),
    ("BSD 3-Clause License", "permissive"), ("GNU General Public License v3.0", "share-alike"),
    ("GPL v3", "share-alike"), ("GNU Lesser General Public License v2.1", "share-alike"),
    ("Mozilla Public License 2.0", "share-alike"), ("Open Database License (ODbL) v1.0", "share-alike"),
    ("Open Government Licence v3.0", "permissive"),
    ("© Crown copyright 2020, licensed under the Open Government Licence v3.0", "permissive"),
    ("Llama 2 Community License", "unknown"), ("trafilatura eval corpus (Apache-2.0)", "permissive"),
    ("CC BY / BY-SA / CC0 marked pages", "share-alike"), ("CC (BY/BY-SA/0/PD mark)", "share-alike"),
    # restrictive free text
    ("All rights reserved", "all-rights-reserved"),
    ("© 2021 The New York Times Company. All Rights Reserved.", "all-rights-reserved"),
    ("Alle Rechte vorbehalten.", "all-rights-reserved"), ("Tous droits réservés", "all-rights-reserved"),
    ("proprietary", "all-rights-reserved"), ("Proprietary and confidential", "all-rights-reserved"),
    ("Copyright 2019 Bureau of Meteorology", "all-rights-reserved"),
    ("Copyright (c) Agence France-Presse", "all-rights-reserved"), ("© Reuters", "all-rights-reserved"),
    ("© MIT Press", "all-rights-reserved"),
    ("Reproduction without the prior written permission of the publisher is prohibited", "all-rights-reserved"),
    ("unlicensed", "all-rights-reserved"), ("not in the public domain", "all-rights-reserved"),
    ("http://rightsstatements.org/vocab/InC/1.0/", "all-rights-reserved"),
    ("http://rightsstatements.org/vocab/NoC-NC/1.0/", "non-commercial"),
    ("not for commercial use", "non-commercial"), ("Non-commercial use only", "non-commercial"),
    ("non commercial", "non-commercial"), ("Commercial use is strictly prohibited", "non-commercial"),
    ("May not be used for commercial purposes", "non-commercial"), ("For personal use only", "non-commercial"),
    ("research use only", "research-only"), ("For research purposes only", "research-only"),
    ("for non-commercial research purposes only", "research-only"), ("Academic use only", "research-only"),
    ("for evaluation only", "research-only"), ("Free for academic use", "research-only"),
    ("No derivatives", "no-derivatives"), ("No derivative works may be made", "no-derivatives"),
    ("Use is subject to the terms of use at https://example.org/terms", "unknown"),
    ("See Terms of Service", "unknown"), ("Custom licence", "unknown"), ("see LICENSE file", "unknown"),
    ("Some rights reserved", "unknown"), ("CC BY 4.0. Some rights reserved.", "permissive"),
    ("The Unlicense", "permissive"), ("Commercial use permitted", "unknown"), ("", "unknown"), ("   ", "unknown"),
]


@pytest.mark.parametrize("text, cls", TABLE)
def test_licence_string_table(text, cls):
    assert classify(text).cls == cls


def test_table_is_broad():
    assert len(TABLE) >= 30 and {cls for _, cls in TABLE} == set(LICENCE_CLASSES)


def test_verdict_names_what_decided():
    v = classify("(MIT OR GPL-3.0-only) AND CC-BY-SA-4.0")
    assert (v.cls, v.mark) == ("share-alike", "CC-BY-SA-4.0")
    assert classify("GPL-3.0-only OR MIT").mark == "MIT"  # OR: the licensee's better choice
    assert "notice" in classify("Copyright 2019 Bureau of Meteorology").mark
    assert classify("Custom licence").mark == "no licence mark recognised"


@pytest.mark.parametrize("value, cls, decided", [
    # objects: licence-named keys first
    ({"license": "CC-BY-NC-4.0", "url": "https://creativecommons.org/licenses/by-nc/4.0/"}, "non-commercial",
     "lic.license: CC-BY-NC-4.0"),
    ({"key": "mit", "name": "MIT License", "spdx_id": "MIT", "url": "https://api.github.com/licenses/mit"},
     "permissive", "lic.spdx_id: MIT"),
    ({"licenses": [{"name": "CC-BY-4.0", "path": "https://x"}, {"name": "CC-BY-ND-4.0"}]}, "no-derivatives",
     "lic.licenses[1].name: CC-BY-ND-4.0"),
    # C5 `potential_licenses`: generic name keys (abbr), versions ignored
    ({"abbr": ["by", "by-sa"], "version": ["4.0", "4.0"], "location": ["meta_tag", "a_tag"]}, "share-alike",
     "lic.abbr[1]: by-sa [sa]"),
    # dolma's Common Crawl licence spans: the keys are the licences, every one counts
    ({"cc_re__cc_re__cc_by_4_0": [[10, 60, 1.0]], "cc_re__cc_re__cc_by_nc_sa_2_0": [[99, 160, 0.5]]},
     "non-commercial", "lic: cc_re__cc_re__cc_by_nc_sa_2_0 [nc]"),
    # lists: the most restrictive element
    (["mit", "cc-by-nc-sa-4.0"], "non-commercial", "lic[1]: cc-by-nc-sa-4.0"),
    (["CC0-1.0", "All rights reserved"], "all-rights-reserved", "lic[1]: All rights reserved"),
    # a JSON object serialised into a string column
    ('{"license": "CC BY-SA 4.0"}', "share-alike", "lic.license: CC BY-SA 4.0 [sa]"),
    # present but unparseable: unknown, never the source's licence
    ({}, "unknown", "lic: {} [empty object]"), ([], "unknown", "lic: [] [empty list]"),
    ("", "unknown", "lic:  [empty licence]"), (42, "unknown", "lic: 42 [a int is no licence]"),
    ({"license": None}, "unknown", "lic.license: null [null inside a licence field]"),
    ({"foo": "bar"}, "unknown", "lic: foo [no licence mark recognised]"),
])
def test_structured_licence_fields(value, cls, decided):
    step = LicencePolicy("permissive", [], field="lic", source="s")
    rec = Record("a", "s", "x", {"lic": value})
    assert list(step.run([rec])) == [rec]  # nothing excluded here: only the reading is tested
    assert (rec.meta["licence_class"], rec.meta["licence_decided_by"]) == (cls, decided)


def test_deep_and_huge_fields_fail_closed():
    assert classify("MIT. " + "Lorem ipsum. " * 10000).cls == "unknown"  # longer than MAX_TEXT: not read
    deep: object = "MIT"
    for _ in range(20):
        deep = {"license": deep}
    assert [v.cls for _, v in licences_in(deep, "f")] == ["unknown"]
    assert [v.cls for _, v in licences_in(["MIT"] * 1000, "f")] == ["unknown"]


def test_field_lookup_and_fallback_to_the_source():
    assert field_value({}, "license") is ABSENT
    assert field_value({"license": None}, "license") is ABSENT  # Arrow cannot tell null from absent
    assert field_value({"meta": {"license": "MIT"}}, "meta.license") == "MIT"
    assert field_value({"meta": {"other": 1}}, "meta.license") is ABSENT
    assert field_value({"meta": "oops"}, "meta.license").cls == "unknown"
    step = LicencePolicy("non-commercial", list(DEFAULT_EXCLUDED), field="meta.license", source="s")
    recs = [Record("a", "s", "x", {"meta": {"license": "MIT"}}), Record("b", "s", "x", {}),
            Record("c", "s", "x", {"meta": {"license": "Copyright 2020 Reuters"}})]
    assert [r.id for r in step.run(recs)] == ["a"]
    assert recs[1].meta == {"licence_class": "non-commercial", "licence_decided_by": "source"}
    assert dict(step.stats.dropped) == {"licence_non-commercial": 1, "licence_all-rights-reserved": 1}


def test_an_excluded_licence_decides_even_when_unknown_is_admitted():
    admit_unknown = [c for c in DEFAULT_EXCLUDED if c != "unknown"]
    step = LicencePolicy("permissive", admit_unknown, field="lic", source="s")
    recs = [Record("a", "s", "x", {"lic": ["Custom licence", "CC-BY-NC-4.0"]}),
            Record("b", "s", "x", {"lic": ["Custom licence", "MIT"]})]
    assert [r.id for r in step.run(recs)] == ["b"]
    assert recs[0].meta["licence_class"] == "non-commercial" and recs[1].meta["licence_class"] == "unknown"


@pytest.mark.shared_data
@pytest.mark.skipif(not (SHARED_DATA / "web_text" / "cc_main_2019_30_extract.jsonl.gz").is_file(),
                    reason="shared/data/web_text/cc_main_2019_30_extract.jsonl.gz is not on this machine")
def test_common_crawl_licence_spans_leave_no_nc_sa_nd_page_in():
    """481 real pages of CC-MAIN-2019-30 with dolma's `cc_license_spans`: every page carrying an NC,
    SA or ND mark is removed under the default policy; the source's own (permissive) class never applies."""
    path = SHARED_DATA / "web_text" / "cc_main_2019_30_extract.jsonl.gz"
    with gzip.open(path) as f:
        rows = [json.loads(line) for line in f]
    recs = [Record(r["id"], "s", r["text"], {"cc_license_spans": r["cc_license_spans"]}) for r in rows]
    marked = {r["id"] for r in rows if any(m in k for k in r["cc_license_spans"] for m in ("_nc", "_sa", "_nd"))}
    step = LicencePolicy("permissive", list(DEFAULT_EXCLUDED), field="cc_license_spans", source="s")
    kept = list(step.run(recs))
    assert marked and not marked & {r.id for r in kept}
    assert len(kept) + sum(step.stats.dropped.values()) == len(rows)
    assert all(r.meta["licence_class"] == "permissive" for r in kept)


def test_licence_decision_wording():
    excl = list(DEFAULT_EXCLUDED)
    assert licence_decision({"class": "non-commercial", "exclude": excl, "field": None}) == "excluded (non-commercial)"
    assert licence_decision({"class": "permissive", "exclude": excl, "field": None}) == "included"
    per_record = licence_decision({"class": "permissive", "exclude": excl, "field": "license"})
    assert per_record.startswith("per record (license") and "source class permissive" in per_record
    admitted = licence_decision({"class": "unknown", "exclude": [c for c in excl if c != "unknown"], "field": None})
    assert admitted == f"included; {UNKNOWN_ADMITTED}"


def test_unknown_source_class_is_refused():
    with pytest.raises(ValueError, match="not one of"):
        LicencePolicy("free", [], source="s")


@pytest.mark.slow
def test_structured_licences_through_a_run(tmp_path):
    """JSON objects, lists and Parquet structs in the licence field decide per record in a real run; the
    decision and what made it travel with kept records; a record without the field keeps the source's."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from curation.commands.run import run
    from tests.conftest import VOCAB, english_doc, write_jsonl

    spans = [{"cc_re__cc_re__cc_by_4_0": [[0, 9, 1.0]]}, {"cc_re__cc_re__cc_by_nc_sa_3_0_es": [[0, 9, 1.0]]},
             {"cc_re__cc_re__cc_by_4_0": [[0, 9, 1.0]], "cc_re__cc_re__cc_by_nd_2_0": [[20, 29, 0.6]]}, {}]
    write_jsonl(tmp_path / "cc.jsonl", [{"id": f"c{i}", "text": english_doc(i), "cc_license_spans": s}
                                        for i, s in enumerate(spans)])
    pq.write_table(pa.Table.from_pylist([
        {"id": "p0", "text": english_doc(10), "rights": {"license": "CC-BY-4.0", "url": "https://x"}},
        {"id": "p1", "text": english_doc(11), "rights": {"license": "All rights reserved", "url": None}},
        {"id": "p2", "text": english_doc(12), "rights": None}]), tmp_path / "hub.parquet")
    (tmp_path / "recipe.yaml").write_text(f"""name: t
vocabulary: {VOCAB}
sources:
  - name: cc
    license: CC BY marked pages
    licence_field: cc_license_spans
    input: {{paths: [cc.jsonl], id_field: id, metadata_fields: [cc_license_spans]}}
  - name: hub
    license: MIT
    licence_field: rights.license
    input: {{format: parquet, paths: [hub.parquet], id_field: id, metadata_fields: [rights]}}
""")
    res = run(tmp_path / "recipe.yaml", tmp_path / "out", workers=1, progress=False)
    drops = {(d["source"], d["reason"]): d["records"] for d in res.rows["drops"] if d["step"] == "licence"}
    assert drops == {("cc", "licence_non-commercial"): 1, ("cc", "licence_no-derivatives"): 1,
                     ("cc", "licence_unknown"): 1, ("hub", "licence_all-rights-reserved"): 1}
    meta = {}
    for src in ("cc", "hub"):
        table = pq.read_table(tmp_path / "out" / "processed" / src / "00000.parquet", columns=["id", "meta"])
        meta |= {i: json.loads(m) for i, m in zip(table.column("id").to_pylist(), table.column("meta").to_pylist())}
    assert sorted(meta) == ["c0", "p0", "p2"]
    assert meta["c0"]["licence_decided_by"] == "cc_license_spans: cc_re__cc_re__cc_by_4_0 [cc by]"
    assert (meta["p0"]["licence_class"], meta["p0"]["licence_decided_by"]) == ("permissive",
                                                                              "rights.license: CC-BY-4.0")
    assert (meta["p2"]["licence_class"], meta["p2"]["licence_decided_by"]) == ("permissive", "source")
