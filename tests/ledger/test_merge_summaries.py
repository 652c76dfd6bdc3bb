"""The ledger's token counts and the manifests' file digests come from the merge tasks' markers (counted and
hashed as the shards were written); a merge marker of an earlier curate, without them, is read the old way
(the driver counts and hashes the shards), and both ways write the same ledger rows and manifests."""
from __future__ import annotations

import json

import pyarrow.parquet as pq
import pytest

from curation.commands.run import run
from curation.core.hashing import sha256_file
from tests.conftest import english_doc, make_recipe, write_jsonl


@pytest.mark.slow
def test_the_merge_markers_counts_equal_reading_the_shards(tmp_path):
    docs = [{"id": f"d{i}", "text": english_doc(i)} for i in range(8)]
    recipe = make_recipe(tmp_path, {"s": [write_jsonl(tmp_path / "in.jsonl", docs)]})
    out = tmp_path / "out"
    first = run(recipe, out, progress=False)
    marker = out / "work" / "markers" / "merge" / "s.json"
    merged = json.loads(marker.read_text())
    main = merged["shards"][""]
    assert main["documents"] == 8 and main["total"] == first.rows["tokens"][0]["total_tokens"] > 0
    for ext, f in main["files"].items():   # the digests the merge took are the files' own
        assert f["sha256"] == sha256_file(out / "tokenized" / "s" / f"s{ext}")
    manifests = {p.name: p.read_bytes() for p in (out / "manifests").glob("*.json")}
    assert manifests

    merged.pop("shards")                    # as an earlier curate wrote it
    marker.write_text(json.dumps(merged))
    again = run(recipe, out, progress=False)
    assert again.executed == 0              # nothing re-run: the finish counted and hashed the shards itself
    assert again.rows["tokens"] == first.rows["tokens"]
    assert {p.name: p.read_bytes() for p in (out / "manifests").glob("*.json")} == manifests


@pytest.mark.slow
def test_domain_tokens_are_summed_by_the_merge_task_and_an_older_runs_markers_give_the_same_rows(tmp_path):
    """Each tokenize task writes its documents and tokens per web domain to a file (its marker holds none: a
    shard can hold thousands of domains, and the driver keeps every marker); the merge task sums a source's
    files, and the ledger copies the sums. Markers of an older curate (the counts in the tokenize markers,
    no summed file) give the same rows, counted on the driver."""
    hosts = ["b.example", "a.example", "news.a.example", "bücher.test", "c.example.co.uk"]
    docs = [{"id": f"d{i}", "text": english_doc(i), **({"url": f"https://{hosts[i % 5]}/p{i}"} if i % 4 else {})}
            for i in range(12)]
    a, b = write_jsonl(tmp_path / "a" / "0.jsonl", docs[:6]), write_jsonl(tmp_path / "a" / "1.jsonl", docs[6:])
    others = [{**d, "id": f"t{i}", "text": english_doc(100 + i)} for i, d in enumerate(docs[:3])]
    recipe = make_recipe(tmp_path, {"s": [a, b], "t": [write_jsonl(tmp_path / "t.jsonl", others)]})
    recipe.write_text(recipe.read_text().replace("id_field: id}", "id_field: id, metadata_fields: [url]}"))
    out = tmp_path / "out"
    first = run(recipe, out, progress=False)
    rows = list(first.rows["domain_tokens"])
    assert [(r["source"], r["web_domain"]) for r in rows] == [
        ("s", None), ("s", "a.example"), ("s", "b.example"), ("s", "example.co.uk"), ("s", "xn--bcher-kva.test"),
        ("t", None), ("t", "a.example")]
    tokens = {t["source"]: t for t in first.rows["tokens"]}
    for source in ("s", "t"):   # every document and token of the main shards, once
        assert sum(r["documents"] for r in rows if r["source"] == source) == tokens[source]["documents"]
        assert sum(r["tokens"] for r in rows if r["source"] == source) == tokens[source]["total_tokens"]
    markers = out / "work" / "markers"
    for path in (markers / "tokenize").rglob("*.json"):
        assert "domains" not in json.loads(path.read_text())

    for path in (markers / "tokenize").rglob("*.json"):   # as an earlier curate wrote them
        marker = json.loads(path.read_text())
        counts = pq.read_table(out / next(o for o in marker["outputs"] if "/domains/" in o)).to_pylist()
        marker["domains"] = {r["web_domain"] or "": [r["documents"], r["tokens"]] for r in counts}
        marker["outputs"] = [o for o in marker["outputs"] if "/domains/" not in o]
        path.write_text(json.dumps(marker))
    for path in (markers / "merge").glob("*.json"):
        marker = json.loads(path.read_text())
        marker.pop("domains")
        path.write_text(json.dumps(marker))
    again = run(recipe, out, progress=False)
    assert again.executed == 0 and list(again.rows["domain_tokens"]) == rows
