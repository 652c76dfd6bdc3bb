"""`curate run` on web inputs: a WARC source and a tar of HTML pages end up as documents with their
URLs, and the read step's counts (drops and quarantines by reason) reach the ledger."""
from __future__ import annotations

import json

import pyarrow.parquet as pq
import pytest

from tests.conftest import VOCAB
from tests.steps.text.readers.test_html import _pages_tar
from tests.steps.text.readers.web_pages import CRAWL_DOCUMENTS, CRAWL_DROPS, crawl


@pytest.mark.slow
def test_run_reads_warc_and_html_sources(tmp_path):
    from curation.commands.run import run
    crawl(tmp_path / "crawl.warc.gz", gz=True)
    _pages_tar(tmp_path / "pages.tar")
    (tmp_path / "recipe.yaml").write_text(f"""name: web
vocabulary: {VOCAB}
dedup: {{exact: null}}
sources:
  - name: crawl
    license: CC-BY-4.0
    input: {{format: warc, paths: [crawl.warc.gz], extract: {{favor: balanced}}}}
  - name: pages
    license: CC-BY-4.0
    input: {{format: html, paths: [pages.tar], id_field: page_id, metadata_fields: [crawl_date]}}
""")
    res = run(tmp_path / "recipe.yaml", tmp_path / "out", workers=1, progress=False)
    read = {r["source"]: r for r in res.rows["steps"] if r["step"] == "read"}
    assert read["crawl"]["records_out"] == len(CRAWL_DOCUMENTS)
    drops = {r["reason"]: r["records"] for r in res.rows["drops"] if r["source"] == "crawl" and r["step"] == "read"}
    assert drops == CRAWL_DROPS and read["crawl"]["quarantined"] == 0
    quarantined = {r["reason"] for r in res.rows["quarantine"] if r["source"] == "pages" and r["step"] == "read"}
    assert quarantined == {"bad_index_row", "not_a_regular_file", "orphan_sidecar"}
    assert read["pages"]["records_out"] == 3
    tokens = {t["source"]: t["documents"] for t in res.rows["tokens"]}
    assert tokens == {"crawl": len(CRAWL_DOCUMENTS), "pages": 3}
    processed = pq.read_table(tmp_path / "out" / "processed" / "crawl").to_pylist()
    metas = {r["id"]: json.loads(r["meta"]) for r in processed}
    assert metas["urn:uuid:resp-a"]["url"] == "https://news.example/a"
    pages = {r["id"]: json.loads(r["meta"]) for r in pq.read_table(tmp_path / "out" / "processed" / "pages").to_pylist()}
    assert sorted(pages) == ["p1", "p2", "p3"] and pages["p1"]["crawl_date"] == "2024-01-01"
