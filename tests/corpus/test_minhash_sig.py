"""Band-major signature files (`curation.corpus.minhash_sig`): a band task's pread slice is the column the
row-major file gave, the band edges are the same from either layout, and a resumed run whose signature files
are row-major recomputes them (its signatures fingerprint moved) while its band and clustering tasks stay done."""
from __future__ import annotations

import io
import json
import os

import numpy as np
import pytest

from curation.core.atomic import save_array
from curation.core.layout import edges_path, sig_path, sig_rows_path
from curation.core.node import Node
from curation.corpus import minhash_sig
from curation.corpus.minhash import run_band
from curation.corpus.minhash_sig import HEADER, documents, header, read_band, read_keys, sig_file, write_signatures
from curation.steps.text.minhash import NO_SHINGLES

FP = "0123456789abcdef"


def _keys(rng, n: int, bands: int = 4, distinct: int = 50) -> np.ndarray:
    """Few distinct keys (so buckets repeat), some NO_SHINGLES rows, some huge keys."""
    keys = rng.integers(1, distinct, (n, bands)).astype(np.uint64)
    keys[rng.random(n) < 0.1] = NO_SHINGLES
    keys[rng.random((n, bands)) < 0.2] += np.uint64(2**63)
    return keys


def _column(keys: np.ndarray, band: int, part: int, parts: int) -> list[tuple[int, int]]:
    """What main's band task took of a row-major file: (row, key) of the band's keys in partition `part`."""
    col = keys[:, band]
    mine = np.flatnonzero(col % np.uint64(parts) == part) if parts > 1 else np.arange(col.size)
    return list(zip(mine.tolist(), col[mine].tolist()))


@pytest.mark.parametrize("n", [0, 1, 2, 37, 500])
@pytest.mark.parametrize("parts", [1, 2, 3, 7, 16])
def test_pread_slices_are_the_row_major_columns(tmp_path, n, parts):
    keys = _keys(np.random.default_rng(n * 31 + parts), n)
    path = tmp_path / "s.bands"
    write_signatures(path, keys, parts, FP)
    assert documents(path) == n
    assert np.array_equal(read_keys(path), keys)
    for band in range(keys.shape[1]):
        got = []
        for part in range(parts):
            k, rows, docs = read_band(path, band, part, parts)
            assert docs == n and k.dtype == np.uint64 and rows.dtype == np.int64
            assert sorted(zip(rows.tolist(), k.tolist())) == _column(keys, band, part, parts)
            assert (k % np.uint64(parts) == part).all() and (np.diff(k.astype(np.float64)) >= 0).all()
            got += rows.tolist()
        assert sorted(got) == list(range(n))   # every document once per band


@pytest.mark.parametrize(("written", "read"), [(1, 4), (4, 1), (3, 5), (8, 2)])
def test_a_file_laid_out_for_other_partitions_reads_the_same(tmp_path, written, read):
    keys = _keys(np.random.default_rng(written), 120)
    path = tmp_path / "s.bands"
    write_signatures(path, keys, written, FP)
    for band in range(keys.shape[1]):
        for part in range(read):
            k, rows, _ = read_band(path, band, part, read)
            assert sorted(zip(rows.tolist(), k.tolist())) == _column(keys, band, part, read)


def test_a_band_task_reads_only_its_slice(tmp_path, monkeypatch):
    """Header, two table entries and the segment, by pread: 12 bytes per key of the slice, no map."""
    keys = _keys(np.random.default_rng(3), 1000, bands=14)
    path = tmp_path / "s.bands"
    write_signatures(path, keys, 8, FP)
    read = []
    real = os.pread
    monkeypatch.setattr(minhash_sig.os, "pread", lambda fd, size, at: read.append(size) or real(fd, size, at))
    monkeypatch.setattr(minhash_sig.np, "load", None)   # never memory-mapped
    k, _, _ = read_band(path, 5, 3, 8)
    assert sum(read) == HEADER.size + 16 + 12 * k.size
    assert sum(read) < path.stat().st_size / 100


def test_row_major_files_of_earlier_versions_are_read(tmp_path):
    keys = _keys(np.random.default_rng(9), 60)
    save_array(sig_rows_path(tmp_path, "a", "0"), keys)
    path = sig_file(tmp_path, "a", "0")
    assert path.suffix == ".npy" and documents(path) == 60 and np.array_equal(read_keys(path), keys)
    for part in range(3):
        k, rows, _ = read_band(path, 2, part, 3)
        assert sorted(zip(rows.tolist(), k.tolist())) == _column(keys, 2, part, 3)
    write_signatures(sig_path(tmp_path, "a", "0"), keys, 3, FP)
    assert sig_file(tmp_path, "a", "0").suffix == ".bands"   # the band-major file wins


def _edges(out, shards, band: int, parts: int, scope: str) -> list[list[list[int]]]:
    found = []
    for part in range(parts):
        spec = {"band": band, "part": part, "partitions": parts, "scope": scope, "index": [], "shards": shards}
        run_band(out, Node("band", None, f"{band}-{part}", "fp", spec=spec))
        found.append(np.load(edges_path(out, band, part)).tolist())
    return found


@pytest.mark.parametrize("parts", [1, 3, 8])
@pytest.mark.parametrize("scope", ["global", "source"])
def test_band_edges_are_those_of_the_row_major_layout(tmp_path, parts, scope):
    """Every band file (edges and their order) the same from band-major files as from main's row-major ones,
    with an empty shard and a one-document shard among them."""
    rng = np.random.default_rng(parts)
    shards = [("a", "0"), ("a", "1"), ("a", "2"), ("b", "0"), ("b", "1")]
    sizes = [50, 0, 1, 70, 33]
    old, new = tmp_path / "old", tmp_path / "new"
    for (source, shard), n in zip(shards, sizes):
        keys = _keys(rng, n, distinct=30)
        save_array(sig_rows_path(old, source, shard), keys)
        write_signatures(sig_path(new, source, shard), keys, parts, FP)
    for band in range(4):
        want = _edges(old, shards, band, parts, scope)
        assert _edges(new, shards, band, parts, scope) == want
        assert sum(map(len, want)) > 0


@pytest.mark.slow
def test_a_resumed_row_major_run_recomputes_its_signatures_only(tmp_path):
    """An output folder written before the band-major layout (row-major `.npy`, markers with the old
    fingerprint): the re-run recomputes the signatures (their fingerprint moved), skips the band and
    clustering tasks (theirs did not: the keys are the same), removes the `.npy` files and writes the same
    clusters and drop lists."""
    from curation.commands.run import run
    from tests.conftest import make_recipe, write_jsonl
    from tests.steps.text.test_minhash import _demo_docs

    texts = _demo_docs(10)
    docs = [{"id": f"d{i}", "text": t} for i, t in enumerate(texts + [t + " Thanks for reading." for t in texts[:4]])]
    write_jsonl(tmp_path / "a.jsonl", docs)
    recipe = make_recipe(tmp_path, {"web": [tmp_path / "a.jsonl"]}, extra="dedup: {exact: null, minhash: {partitions: 2}}")
    out = tmp_path / "out"
    first = run(recipe, out, progress=False)
    drops = sorted((out / "work" / "minhash" / "drops").rglob("*.parquet"))
    before = {p: p.read_bytes() for p in drops}
    assert first.rows["clusters"] and before
    markers = out / "work" / "markers"
    sig_markers = sorted((markers / "signatures").rglob("*.json"))
    band_markers = sorted((markers / "band").rglob("*.json"))
    for m in sig_markers:   # back to what the previous version wrote
        marker = json.loads(m.read_text())
        bands = out / marker["outputs"][0]
        source, shard = bands.parent.name, bands.stem
        keys_fp = header(bands)[0]   # the keys' fingerprint: what the signatures node's fingerprint was
        save_array(sig_rows_path(out, source, shard), read_keys(bands))
        bands.unlink()
        marker.update(fingerprint=keys_fp, outputs=[str(sig_rows_path(out, source, shard).relative_to(out))])
        m.write_text(json.dumps(marker))
    band_times = [m.stat().st_mtime_ns for m in band_markers]
    second = run(recipe, out, progress=False)
    assert second.rows["clusters"] == first.rows["clusters"]
    assert {p: p.read_bytes() for p in drops} == before
    assert [m.stat().st_mtime_ns for m in band_markers] == band_times   # not re-run
    assert not list((out / "work" / "minhash" / "sig").rglob("*.npy"))
    for m in sig_markers:
        assert json.loads(m.read_text())["outputs"][0].endswith(".bands")


def test_a_changed_partition_count_re_lays_out_the_same_keys(tmp_path, monkeypatch):
    """The signatures task finds its keys (same fingerprint) laid out for 2 partitions: it writes them for 5
    without reading any text (no processed shard here); keys of another fingerprint are computed."""
    from curation.corpus import minhash
    from curation.corpus.minhash import run_signatures

    keys = _keys(np.random.default_rng(5), 80)
    write_signatures(sig_path(tmp_path, "a", "0"), keys, 2, FP)
    node = Node("signatures", "a", "0", "-", spec={"partitions": 5, "keys": FP})
    assert run_signatures(tmp_path, node) == {"documents": 80, "outputs": ["work/minhash/sig/a/0.bands"]}
    assert header(sig_path(tmp_path, "a", "0")) == (FP, 80, 4, 5)
    assert np.array_equal(read_keys(sig_path(tmp_path, "a", "0")), keys)
    computed = keys[:7] + np.uint64(1)
    monkeypatch.setattr(minhash, "_signatures", lambda out, node: computed)
    run_signatures(tmp_path, Node("signatures", "a", "0", "-", spec={**node.spec, "keys": "f" * 16}))
    assert header(sig_path(tmp_path, "a", "0")) == ("f" * 16, 7, 4, 5)
    assert np.array_equal(read_keys(sig_path(tmp_path, "a", "0")), computed)


def test_index_folders_of_either_layout(tmp_path):
    """`dedup.minhash.index` takes an earlier folder's band-major and row-major files (one entry per shard,
    in the order the row-major paths sorted in)."""
    from types import SimpleNamespace

    from curation.core.layout import work_dir
    from curation.corpus.minhash import index_shards

    old = tmp_path / "old"
    want = {"ngram": 5, "seed": 1, "language": "eng", "bands": 4, "rows": 2}
    (work_dir(old, "minhash")).mkdir(parents=True)
    (work_dir(old, "minhash") / "params.json").write_text(json.dumps(want))
    keys = _keys(np.random.default_rng(1), 10)
    save_array(sig_rows_path(old, "b", "00001"), keys)
    save_array(sig_rows_path(old, "a", "00000"), keys)              # both layouts of one shard: listed once
    write_signatures(sig_path(old, "a", "00000"), keys, 3, FP)
    write_signatures(sig_path(old, "a", "00000-x"), keys, 3, FP)    # '-' sorts before '.' in "00000.npy"
    cfg = SimpleNamespace(index=[str(old)], ngram=5, seed=1, language="eng")
    loaded = SimpleNamespace(resolve=lambda folder: old)
    assert index_shards(loaded, cfg, 4, 2) == [[str(old), "a", "00000-x"], [str(old), "a", "00000"],
                                               [str(old), "b", "00001"]]
    assert sig_file(old, "a", "00000").suffix == ".bands" and sig_file(old, "b", "00001").suffix == ".npy"


def test_partitions_move_the_signatures_layout_not_their_keys(tmp_path):
    """The signatures node's fingerprint covers the layout's partitions; the keys' fingerprint (what the band
    tasks' fingerprints cover, as before the band-major layout) does not move with them."""
    from curation.plan.graph import load_plan
    from tests.conftest import make_recipe, write_jsonl

    write_jsonl(tmp_path / "a.jsonl", [{"id": "d0", "text": "one two three four five six"}])
    plans = []
    for parts in (1, 3):
        folder = tmp_path / str(parts)
        folder.mkdir()
        recipe = make_recipe(folder, {"web": [tmp_path / "a.jsonl"]},
                             extra=f"dedup: {{exact: null, minhash: {{partitions: {parts}}}}}")
        plans.append({n.key: n for n in load_plan(recipe).nodes()})
    (sig1,), (sig3,) = ([n for n in p.values() if n.phase == "signatures"] for p in plans)
    assert sig1.fingerprint != sig3.fingerprint and sig1.spec["keys"] == sig3.spec["keys"]
    assert (sig1.spec["partitions"], sig3.spec["partitions"]) == (1, 3)
    assert plans[0]["process/web/00000"].fingerprint == plans[1]["process/web/00000"].fingerprint


def test_a_band_task_of_an_output_url_downloads_only_its_slice_of_each_file(tmp_path, monkeypatch):
    """On an output URL a task first fetches what it reads (`curation.runtime.publish.fetch`). A band task
    fetches the header and table up to its entries, then its segment, of each signature file (two ranged
    reads into a sparse file), never a whole file: the band phase downloads each signature once in all, not once per task. Its
    edges are those of a local run, and a resolve task's header-only copy gives the document count."""
    import fsspec

    from curation.core.outloc import Remote
    from curation.corpus.minhash_sig import header_pieces
    from curation.runtime.node import run_node
    monkeypatch.setenv("CURATE_STAGING", str(tmp_path / "staging"))
    fs = fsspec.filesystem("memory")
    root = f"bkt-{tmp_path.name}/run"
    url, local, parts, bands = f"memory://{root}", tmp_path / "local", 4, 6
    shards, deps, rng = [("a", "0"), ("a", "1"), ("b", "0"), ("b", "1")], [], np.random.default_rng(5)
    for (source, shard), n in zip(shards, (400, 400, 400, 0)):    # an empty shard: empty segments, no request
        path = sig_path(local, source, shard)
        write_signatures(path, _keys(rng, n, bands=bands, distinct=60), parts, FP)
        rel = str(path.relative_to(local))
        fs.pipe_file(f"{root}/{rel}", path.read_bytes())
        deps.append(f"signatures/{source}/{shard}")
        fs.pipe_file(f"{root}/work/markers/{deps[-1]}.json", json.dumps({"outputs": [rel]}).encode())
    ranged, whole = [], []
    cat, get = type(fs).cat_file, type(fs).get_file
    monkeypatch.setattr(type(fs), "cat_file", lambda self, p, start=None, end=None, **kw: (
        ranged.append((p, start, end)) if p.endswith(".bands") else None) or cat(self, p, start=start, end=end, **kw))
    monkeypatch.setattr(type(fs), "get_file", lambda self, p, *a, **kw: whole.append(p) or get(self, p, *a, **kw))
    for band in (0, 5):
        for part in range(parts):
            spec = {"band": band, "part": part, "partitions": parts, "scope": "global", "index": [],
                    "shards": [list(s) for s in shards]}
            ranged.clear()
            run_node(url, Node("band", None, f"{band:03d}-{part:03d}", "fp", deps=deps, spec=spec))
            got = np.load(io.BytesIO(fs.cat_file(f"{root}/{edges_path(local, band, part).relative_to(local)}")))
            run_band(local, Node("band", None, f"{band:03d}-{part:03d}", "fp", spec=spec))
            assert np.array_equal(got, np.load(edges_path(local, band, part)))
            for source, shard in shards:    # header and table, then the segment: 12 bytes per key
                path = sig_path(local, source, shard)
                asked = [e - s for p, s, e in ranged if p.endswith(str(path.relative_to(local)))]
                table = 8 * (band * parts + part + 2)   # the header and the table up to its entries: one request
                keys = read_band(path, band, part, parts)[0].size
                assert sum(asked) == HEADER.size + table + 12 * keys and min(asked) > 0
                assert len(asked) == (2 if keys else 1) and (not keys or sum(asked) < path.stat().st_size / 10)
    assert not [p for p in whole if p.endswith(".bands")]
    rel = str(sig_path(local, "b", "0").relative_to(local))
    assert Remote(url).get_pieces(rel, tmp_path / "head.bands", header_pieces) == HEADER.size
    assert documents(tmp_path / "head.bands") == 400
