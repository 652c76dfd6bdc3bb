"""The ledger's token counts and the manifests' file digests come from the merge tasks' markers (counted and
hashed as the shards were written); a merge marker of an earlier curate, without them, is read the old way
(the driver counts and hashes the shards), and both ways write the same ledger rows and manifests."""
from __future__ import annotations

import json

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
