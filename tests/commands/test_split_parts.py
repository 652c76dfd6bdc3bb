"""Bounded-size output parts: the multimodal demo with `shards.max_part_bytes` so small that every source's
shard sets split into many parts, against the demo run that writes one prefix per set (`demo_run`)."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from curation.core.hashing import sha256_file
from curation.errors import VerifyError
from curation.mixture.manifests import verify_manifest
from curation.shards.indexed import read_index
from curation.shards.shardset import ShardSet
from tests.conftest import REPO
from tests.outputs import token_balance

pytestmark = pytest.mark.slow

PART_BYTES = 2048          # 512 int32 tokens: most web documents are larger, so are parts of their own
SETS = [("c4_en", ""), ("web_en", ""), ("web_de", ""), ("web_warc", ""), ("captioned", ""), ("speech", ""),
        ("speech", ".long_context"), ("unpaired", "")]


@pytest.fixture(scope="module")
def split_run(demo_run, tmp_path_factory):
    """The demo's output copied and run again with small parts: only the merges and what reads them run
    again (no other node's fingerprint reads `shards:`), and each split set's one prefix is replaced."""
    from curation.commands.run import run

    tmp = tmp_path_factory.mktemp("split")
    (tmp / "recipes").mkdir()
    (tmp / "tokenizers").symlink_to(REPO / "tokenizers")
    for folder in ("demo", "images", "audio", "classifiers"):
        (tmp / "recipes" / folder).symlink_to(REPO / "recipes" / folder)
    recipe = tmp / "recipes" / "demo.yaml"
    recipe.write_text((REPO / "recipes" / "demo.yaml").read_text() + f"\nshards: {{max_part_bytes: {PART_BYTES}}}\n")
    shutil.copytree(demo_run.out, tmp / "out", symlinks=True)
    result = run(recipe, tmp / "out", progress=False)
    merges = [n for n in result.plan.nodes() if n.phase == "merge"]
    assert 0 < len(merges) <= result.executed < demo_run.executed, (result.executed, demo_run.executed)
    return result


def _docs(prefix: Path) -> list[list[int]]:
    from megatron.core.datasets.indexed_dataset import IndexedDataset

    if not read_index(Path(f"{prefix}.idx"))[1].size:
        return []                                  # an empty pool: its .idx alone (megatron cannot map no .bin)
    ds = IndexedDataset(str(prefix))
    return [ds[i].tolist() for i in range(len(ds))]


def test_every_part_is_a_megatron_dataset_and_the_parts_are_the_unsplit_documents_in_order(split_run, demo_run):
    split = 0
    for source, suffix in SETS:
        whole = Path(f"{demo_run.out / 'tokenized' / source / source}{suffix}")
        prefix = Path(f"{split_run.out / 'tokenized' / source / source}{suffix}")
        shards = ShardSet.on_disk(prefix)
        want = _docs(whole)
        if len(shards.prefixes) == 1:              # a set under one part keeps the one prefix
            assert shards.prefixes == [prefix] and Path(f"{prefix}.bin").read_bytes() == Path(f"{whole}.bin").read_bytes()
            continue
        split += 1
        assert not Path(f"{prefix}.idx").exists() and not Path(f"{prefix}.bin").exists()
        assert [p.name for p in shards.prefixes] == [f"{prefix.name}.part-{k:05d}" for k in range(len(shards.prefixes))]
        got = []
        for p in shards.prefixes:
            docs = _docs(p)
            assert docs, p                         # no empty part
            size = Path(f"{p}.bin").stat().st_size
            assert size <= PART_BYTES or len(docs) == 1, (p, size)   # a larger document is a part of its own
            got += docs
        assert got == want, (source, suffix)
        assert shards.lengths().tolist() == [len(d) for d in want]
        assert shards.unsplit_sha256() == [sha256_file(Path(f"{whole}{e}")) for e in (".bin", ".idx")]
    assert split >= 5
    # the empty long-context pool of `unpaired` is still an .idx alone, with no part
    assert not list((split_run.out / "tokenized" / "unpaired").glob("unpaired.long_context*.bin"))
    assert (split_run.out / "tokenized" / "unpaired" / "unpaired.long_context.idx").is_file()


def test_the_tokens_table_sums_to_every_part(split_run, demo_run):
    import duckdb

    con = duckdb.connect(str(split_run.out / "ledger" / "ledger.duckdb"), read_only=True)
    pools = con.sql("SELECT source, pool, documents, total_tokens FROM tokens ORDER BY source, pool").fetchall()
    con.close()
    idx = list((split_run.out / "tokenized").glob("*/*.idx"))
    assert len(idx) > len(pools)
    assert sum(t for *_, t in pools) == sum(int(read_index(p)[1].sum()) for p in idx)
    ledger, shards, _ = token_balance(split_run.out)     # tests/ledger/test_balance.py's helper agrees
    assert ledger == shards > 0
    con = duckdb.connect(str(demo_run.out / "ledger" / "ledger.duckdb"), read_only=True)
    assert pools == con.sql("SELECT source, pool, documents, total_tokens FROM tokens ORDER BY source, pool").fetchall()
    con.close()


def test_the_hand_off_and_plans_are_the_unsplit_runs_and_the_manifests_list_every_part(split_run, demo_run):
    for stage in ("stage1", "stage2", "long-context-4k"):
        a = json.loads((demo_run.out / "manifests" / f"{stage}.json").read_text())
        b = json.loads((split_run.out / "manifests" / f"{stage}.json").read_text())
        assert b["stage_fingerprint"] == a["stage_fingerprint"] and b["megatron"] == a["megatron"]
        assert b["blend"] == a["blend"] and b["long_context"] == a["long_context"]
        for sa, sb in zip(a["sources"], b["sources"]):
            assert sb.get("plan") == sa.get("plan") and sb["tokens"] == sa["tokens"]
            shards = ShardSet.of_entry(split_run.out / "manifests", sb)
            on_disk = ShardSet.on_disk(split_run.out / "manifests" / sb["prefix"])
            assert [p.resolve() for p in shards.prefixes] == [p.resolve() for p in on_disk.prefixes]
            if len(shards.prefixes) > 1:
                assert sb["unsplit_sha256"] == [f["sha256"] for f in sa["files"]]
                assert [f["path"] for f in sb["files"]] == [f"{p}{e}" for p in sb["parts"] for e in (".bin", ".idx")]
            else:
                assert "parts" not in sb and sb["files"] == sa["files"]
        for p in a["megatron"]["prefixes"]:     # packed: the same sequences, byte for byte
            for f in p["files"]:
                assert (split_run.out / "manifests" / f["path"]).read_bytes() == \
                    (demo_run.out / "manifests" / f["path"]).read_bytes()
        for plan in (demo_run.out / "manifests" / "plans" / stage).glob("*.npy"):
            assert plan.read_bytes() == (split_run.out / "manifests" / "plans" / stage / plan.name).read_bytes()


def test_verify_passes_and_catches_a_missing_or_corrupted_part(split_run, tmp_path):
    from curation.commands.cli import main

    for stage in ("stage1", "stage2", "long-context-4k"):
        verify_manifest(split_run.out / "manifests" / f"{stage}.json")
    out = tmp_path / "copy"
    shutil.copytree(split_run.out, out, symlinks=True, ignore=shutil.ignore_patterns("raw", "work", "processed"))
    manifest = out / "manifests" / "stage1.json"
    assert main(["verify", "--relocate", str(manifest)]) == 0      # the copy's hand-off names the copy
    assert main(["verify", str(manifest)]) == 0
    part = out / "tokenized" / "web_de" / "web_de.part-00003"
    saved = Path(f"{part}.bin").read_bytes()
    Path(f"{part}.bin").unlink()
    with pytest.raises(VerifyError, match=r"web_de: .*web_de.part-00003.bin is missing"):
        verify_manifest(manifest)
    assert main(["verify", str(manifest)]) != 0
    data = bytearray(saved)
    data[0] ^= 0xFF
    Path(f"{part}.bin").write_bytes(bytes(data))
    with pytest.raises(VerifyError, match=r"web_de: .*web_de.part-00003.bin sha256 differs"):
        verify_manifest(manifest)
    Path(f"{part}.bin").write_bytes(saved)
    m = json.loads(manifest.read_text())
    entry = next(s for s in m["sources"] if s["name"] == "web_de")
    entry["parts"].pop(3)                       # a manifest that leaves a part out (digests aside)
    manifest.write_text(json.dumps(m))
    with pytest.raises(VerifyError, match=r"web_de: unsplit_sha256 does not recompute from its parts"):
        verify_manifest(manifest)


def test_on_ray_each_part_is_a_task_of_its_own_and_the_bytes_are_the_same(split_run, tmp_path, ray_local):
    """The split run's merges again on embedded Ray (2 workers): every set of several parts is written by a
    task per part (`runtime.fanout`) while the merge task hashes the unsplit set; the files, the merge markers'
    `shards`, the ledger and the manifests are those the local executor wrote."""
    from curation.commands.run import run
    from curation.core.layout import marker_path
    from tests.benchmarks.compare_outputs import compare

    out = tmp_path / "out"
    shutil.copytree(split_run.out, out, symlinks=True)
    merges = [n for n in split_run.plan.nodes() if n.phase == "merge"]
    for n in merges:
        marker_path(out, n.key).unlink()
    for f in (out / "tokenized").glob("*/*.*"):   # the merged sets (the tokenize parts are in */parts/)
        f.unlink()
    result = run(split_run.plan.recipe.path, out, progress=False, executor="ray", workers=2)
    assert result.executed == len(merges)
    assert compare(split_run.out, out) == []
    spread = 0
    for n in merges:
        local, on_ray = (json.loads(marker_path(o, n.key).read_text()) for o in (split_run.out, out))
        assert on_ray["shards"] == local["shards"]
        parts = sum(len(s.get("parts", [])) for s in on_ray["shards"].values())
        assert on_ray.get("part_tasks", 0) == parts and "part_tasks" not in local
        spread += parts
    assert spread > 20


def test_a_bad_part_size_is_a_recipe_error_naming_the_field(tmp_path):
    from curation.errors import RecipeError
    from curation.recipe import load_recipe

    recipe = _beside_text(tmp_path)
    text = recipe.read_text()
    for bad in ("0", "-5", "100", "4GiB", "1.5e3"):
        recipe.write_text(text + f"\nshards: {{max_part_bytes: {bad}}}\n")
        with pytest.raises(RecipeError, match=r"shards\.max_part_bytes") as e:
            load_recipe(recipe, resolve_inputs=False)
        if bad in ("0", "-5", "100"):
            assert "must be >= 1024" in str(e.value)
    recipe.write_text(text + "\nshards: {max_bytes: 4096}\n")
    with pytest.raises(RecipeError, match=r"shards\.max_bytes.*unknown key"):
        load_recipe(recipe, resolve_inputs=False)


def _beside_text(tmp_path: Path) -> Path:
    """A copy of recipes/text.yaml whose relative paths still hold."""
    (tmp_path / "recipes").mkdir()
    (tmp_path / "tokenizers").symlink_to(REPO / "tokenizers")
    for folder in ("demo", "classifiers"):
        (tmp_path / "recipes" / folder).symlink_to(REPO / "recipes" / folder)
    recipe = tmp_path / "recipes" / "text.yaml"
    recipe.write_text((REPO / "recipes" / "text.yaml").read_text())
    return recipe


def test_an_unset_part_size_is_in_no_fingerprint_and_a_set_one_is_in_the_merges(tmp_path):
    from curation.plan.graph import load_plan
    from curation.recipe.load import _fingerprinted

    recipe = _beside_text(tmp_path)
    plain = load_plan(recipe)
    assert "shards" not in _fingerprinted(plain.recipe.recipe)   # the recipe's content as it was before the field
    assert all("max_part_bytes" not in n.spec for n in plain.merge)
    recipe.write_text(recipe.read_text() + "\nshards: {max_part_bytes: 4096}\n")
    sized = load_plan(recipe)
    assert sized.recipe.recipe.shards.max_part_bytes == 4096 and plain.recipe.recipe.shards is None
    assert sized.recipe.fingerprint != plain.recipe.fingerprint
    assert [n.fingerprint for n in sized.tokenize] == [n.fingerprint for n in plain.tokenize]
    assert all(a.fingerprint != b.fingerprint and b.spec["max_part_bytes"] == 4096
               for a, b in zip(plain.merge, sized.merge))


def test_a_hand_off_prefix_size_alone_moves_no_task_fingerprint(tmp_path):
    """`shards: {max_handoff_bytes: N}` changes how the finish writes the packed hand-off, nothing a task
    writes: every node keeps its fingerprint (a run with it set re-runs no task), the recipe's changes."""
    from curation.plan.graph import load_plan
    from curation.recipe.load import _fingerprinted

    recipe = _beside_text(tmp_path)
    plain = load_plan(recipe)
    recipe.write_text(recipe.read_text() + "\nshards: {max_handoff_bytes: 65536}\n")
    bounded = load_plan(recipe)
    assert [n.fingerprint for n in bounded.nodes()] == [n.fingerprint for n in plain.nodes()]
    assert bounded.recipe.fingerprint != plain.recipe.fingerprint
    assert _fingerprinted(bounded.recipe.recipe)["shards"]["max_handoff_bytes"] == 65536


def test_a_rerun_at_the_default_size_rewrites_the_one_prefix_and_leaves_no_part(split_run, demo_run, tmp_path):
    from curation.commands.run import run

    out = tmp_path / "out"
    shutil.copytree(split_run.out, out, symlinks=True)
    plain = tmp_path / "recipes"       # the split run's recipe folder, its recipe without `shards:`
    shutil.copytree(split_run.plan.recipe.path.parent, plain, symlinks=True)
    (tmp_path / "tokenizers").symlink_to(REPO / "tokenizers")
    text = (plain / "demo.yaml").read_text().replace(f"\nshards: {{max_part_bytes: {PART_BYTES}}}\n", "")
    (plain / "demo.yaml").write_text(text)
    res = run(plain / "demo.yaml", out, progress=False, force=True)
    assert res.executed == len(res.plan.merge)          # only the merges: the part size is theirs alone
    assert not list((out / "tokenized").glob("*/*.part-*"))
    got = {p.relative_to(out): p.read_bytes() for p in (out / "tokenized").glob("*/*.*")}
    want = {p.relative_to(demo_run.out): p.read_bytes() for p in (demo_run.out / "tokenized").glob("*/*.*")}
    assert got == want


def test_curate_train_reads_the_same_batches_from_parts(split_run, demo_run):
    from curation.train.data import ManifestData

    for stage in ("stage1", "stage2"):
        a = ManifestData(demo_run.out / "manifests" / f"{stage}.json", seq_length=64)
        b = ManifestData(split_run.out / "manifests" / f"{stage}.json", seq_length=64)
        assert sum(x.size for x in a.token_arrays()) == sum(x.size for x in b.token_arrays())
        for _ in range(40):
            x, y = a.next_batch(4), b.next_batch(4)
            assert (x.tokens == y.tokens).all() and (x.doc == y.doc).all() and (x.source == y.source).all()
            assert [u.tolist() for u in x.lead] == [v.tolist() for v in y.lead]
        assert a.consumed.state() == b.consumed.state()
