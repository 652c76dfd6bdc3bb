"""Exact dedup partitioned by hash range gives the drop lists of the sequential rule it replaced
(`tests/corpus/exact_oracle.py`), for any partition count and shard order, in memory and as tasks."""
from __future__ import annotations

import io
import json
import random

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from curation.core.hashing import content_hash
from curation.core.layout import drops_path, processed_path
from curation.core.urls import normalize_url
from curation.corpus.exact import part_shared, resolve_duplicates
from curation.corpus.partition import (
    INDEX_STRIDE,
    range_index,
    range_slice,
    range_window,
    resolve,
    shard_keys,
    sort_keys,
)
from curation.steps.droplist import read_drops
from tests.corpus.exact_oracle import sequential_duplicates


def generated(seed: int, n_shards: int = 9, per: int = 250, texts: int = 160, urls: int = 140):
    """Shards of 3 sources in canonical order, dense in exact copies, URL re-crawls and chains of both
    (a copy of a record that was itself dropped as a re-crawl, a re-crawl of a copy, ...)."""
    rng = random.Random(seed)
    shards = []
    for s in range(n_shards):
        source = f"s{s % 3}"
        hashes = [content_hash(f"text {rng.randrange(texts)}") for _ in range(per)]
        links = [None if rng.random() < 0.25 else normalize_url(f"https://site{rng.randrange(9)}.example/"
                                                                f"{rng.randrange(urls)}") for _ in range(per)]
        shards.append((source, f"{s:05d}", hashes, [f"{source}-{s}-{i}" for i in range(per)], links))
    return sorted(shards, key=lambda sh: (sh[0], sh[1]))


@pytest.mark.slow
@pytest.mark.parametrize("scope", ["global", "source"])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_any_partition_count_gives_the_sequential_rule(seed, scope):
    shards = generated(seed)
    want = sequential_duplicates(shards, scope)
    assert {r["reason"] for r in want} == {"exact_duplicate", "url_duplicate"}
    for parts in (1, 2, 3, 7, 16, 100):
        assert resolve_duplicates(shards, scope, parts) == want, parts


def test_the_order_shards_reach_a_part_does_not_matter():
    shards = generated(3)
    keys = [sort_keys(shard_keys(h, u)) for _, _, h, _, u in shards]
    for part in range(4):
        slices = [(n, 0, range_slice(k, part, 4)) for n, k in enumerate(keys)]
        ref = resolve(part_shared(slices))
        for trial in range(3):
            random.Random(trial).shuffle(slices)
            got = part_shared(slices)
            assert np.array_equal(resolve(got), ref)


def test_a_copy_of_a_dropped_recrawl_is_kept_and_owns_its_url():
    """A(h1,u1) kept; B(h2,u1) re-crawl of A; C(h2,u2): its content's only earlier copy (B) was dropped,
    so C is kept; D(h3,u2) is a re-crawl of C; E(h1,None) a copy of A."""
    h = [content_hash(t) for t in ("one", "two", "three")]
    u1, u2 = "https://a.example/1", "https://a.example/2"
    shards = [("a", "0", [h[0], h[1]], ["A", "B"], [u1, u1]), ("a", "1", [h[1], h[2], h[0]], ["C", "D", "E"],
                                                                  [u2, u2, None])]
    rows = resolve_duplicates(shards, "global", 2)
    assert [(r["id"], r["reason"], r["duplicate_of_id"]) for r in rows] == [
        ("B", "url_duplicate", "A"), ("D", "url_duplicate", "C"), ("E", "exact_duplicate", "A")]
    assert rows == sequential_duplicates(shards, "global")


def _write_processed(out, shards, url_field="url"):
    schema = pa.schema([("id", pa.string()), ("text", pa.string()), ("meta", pa.string()),
                        ("content_hash", pa.binary(16))])
    for source, shard, hashes, ids, links in shards:
        path = processed_path(out, source, shard)
        path.parent.mkdir(parents=True, exist_ok=True)
        meta = [json.dumps({url_field: u} if u else {}) for u in links]
        pq.write_table(pa.table({"id": ids, "text": ["x"] * len(ids), "meta": meta, "content_hash": hashes},
                                schema=schema), path, row_group_size=64)


@pytest.mark.parametrize("parts", [1, 5])
def test_the_phase_tasks_write_the_sequential_rules_drop_lists(tmp_path, parts):
    shards = generated(4, n_shards=6, per=300)
    from tests.corpus.test_exact_cc import run_phase_tasks  # every stage, the components' included
    names = [(s, sh) for s, sh, *_ in shards]
    payload = run_phase_tasks(tmp_path, shards, "global", parts)["exact"][0]
    want = sequential_duplicates(shards, "global")
    assert payload["duplicates"] == len(want)
    for s, sh in names:
        mine = [(r["id"], r["reason"], r["detail"]) for r in want if (r["source"], r["shard"]) == (s, sh)]
        got = read_drops(drops_path(tmp_path, "exact", s, sh))
        assert list(got.items()) == [(i, (r, d)) for i, r, d in mine]
    # a resolve part's row groups follow its rows, not the shards (`cc_files.write_resolved`)
    from curation.corpus.exact_cc import _resolve_paths
    files = [pq.ParquetFile(_resolve_paths(tmp_path, "text", q)[0]) for q in range(parts)]
    assert sum(f.metadata.num_rows for f in files) == len(want) and all(f.num_row_groups <= 1 for f in files)


def test_the_partition_setting_plans_ranges_and_moves_no_fingerprint_of_the_result(tmp_path):
    from curation.plan.graph import load_plan
    from curation.recipe import load_recipe
    from tests.conftest import english_doc, make_recipe, write_jsonl

    files = [write_jsonl(tmp_path / f"{k}.jsonl", [{"id": f"{k}-{i}", "text": english_doc(10 * k + i)}
                                                   for i in range(3)]) for k in range(4)]
    plans = {}
    for parts in (None, 3):
        setting = f", partitions: {parts}" if parts else ""
        recipe = make_recipe(tmp_path, {"a": files}, extra=f"dedup: {{exact: {{scope: global{setting}}}}}")
        plans[parts] = load_plan(recipe)
        fp = load_recipe(recipe).fingerprint
        plans[parts].recipe_fp = fp
    auto, three = plans[None], plans[3]
    assert len([n for n in auto.nodes() if n.phase == "exact_part"]) == 1   # one per 16 shards
    assert len([n for n in three.nodes() if n.phase == "exact_part"]) == 3
    final = {p: next(n for n in plan.nodes() if n.phase == "exact") for p, plan in plans.items()}
    assert final[None].fingerprint == final[3].fingerprint         # the result does not depend on it
    assert auto.recipe_fp == three.recipe_fp
    assert [n.fingerprint for n in auto.tokenize] == [n.fingerprint for n in three.tokenize]


def test_the_range_index_finds_the_searched_slices_within_their_window():
    rng = np.random.default_rng(0)
    for n in (0, 1, INDEX_STRIDE, INDEX_STRIDE + 1, 5 * INDEX_STRIDE + 17):
        k = sort_keys(np.column_stack([rng.integers(0, 2**63, (n, 2), dtype=np.int64).astype(np.uint64) * np.uint64(2),
                                       np.zeros((n, 1), np.uint64), np.arange(n, dtype=np.uint64)]))
        index = range_index(k)
        for parts in (1, 2, 3, 8, 100):
            for part in range(parts):
                want = range_slice(k, part, parts)
                assert np.array_equal(range_slice(k, part, parts, index), want)
                lo, hi = range_window(index, n, part, parts)   # the rows it read lie in its window
                window = np.full(k.shape, np.uint64(2**64 - 1))
                window[lo:hi] = k[lo:hi]
                assert np.array_equal(range_slice(window, part, parts, index), want), (n, parts, part)
                assert hi - lo <= want.shape[0] + 2 * INDEX_STRIDE


def test_a_part_task_of_an_output_url_downloads_only_its_hash_range(tmp_path, monkeypatch):
    """On an output URL an `exact_part` task fetches each shard's range index, then the keys' `.npy` header
    and its range's rows (a stride more at each end) into a sparse file of the array's size; its shared keys
    are the local run's."""
    import fsspec

    from curation.core.layout import exact_keys_path, exact_part_path
    from curation.core.node import Node
    from curation.corpus.exact import run_keys, run_part
    from curation.runtime.node import run_node
    monkeypatch.setenv("CURATE_STAGING", str(tmp_path / "staging"))
    shards, parts = generated(5, n_shards=4, per=600), 4
    local, fs = tmp_path / "local", fsspec.filesystem("memory")
    root = f"exact-{tmp_path.name}/run"
    names, deps = [(s, sh) for s, sh, *_ in shards], []
    for source, shard, hashes, ids, links in shards:
        path = processed_path(local, source, shard)
        path.parent.mkdir(parents=True, exist_ok=True)
        pq.write_table(pa.table({"id": ids, "content_hash": hashes,
                                 "meta": [json.dumps({"url": u} if u else {}) for u in links]}), path)
        marker = run_keys(local, Node("exact_keys", source, shard, "fp", spec={"url": "url"}))
        for rel in marker["outputs"]:
            fs.pipe_file(f"{root}/{rel}", (local / rel).read_bytes())
        deps.append(f"exact_keys/{source}/{shard}")
        fs.pipe_file(f"{root}/work/markers/{deps[-1]}.json", json.dumps(marker).encode())
    ranged, whole = [], []
    cat, get = type(fs).cat_file, type(fs).get_file
    monkeypatch.setattr(type(fs), "cat_file", lambda self, p, start=None, end=None, **kw: (
        ranged.append((p, start, end)) if p.endswith(".npy") else None) or cat(self, p, start=start, end=end, **kw))
    monkeypatch.setattr(type(fs), "get_file", lambda self, p, *a, **kw: whole.append(p) or get(self, p, *a, **kw))
    for part in range(parts):
        spec = {"modality": "text", "part": part, "partitions": parts, "scope": "global", "shards": names}
        ranged.clear()
        run_node(f"memory://{root}", Node("exact_part", None, f"text-{part:04d}", "fp", deps=deps, spec=spec))
        rel = exact_part_path(local, "text", part).relative_to(local)
        got = np.load(io.BytesIO(fs.cat_file(f"{root}/{rel}")))
        run_part(local, Node("exact_part", None, f"text-{part:04d}", "fp", spec=spec))
        assert np.array_equal(got, np.load(exact_part_path(local, "text", part))) and got.size
        for source, shard in names:   # the header (128 bytes) and a quarter of the rows, a stride more each end
            size = exact_keys_path(local, source, shard).stat().st_size
            asked = sum(e - s for p, s, e in ranged if p.endswith(f"keys/{source}/{shard}.npy"))
            assert 128 < asked <= 128 + 0.25 * (size - 128) + 2 * INDEX_STRIDE * 32 * 1.5, (asked, size)
    assert not [p for p in whole if p.endswith(".npy")]
    assert sorted({p.rsplit(".", 1)[1] for p in whole}) == ["index"]   # the small range index, whole
