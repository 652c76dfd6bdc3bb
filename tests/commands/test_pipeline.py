"""End to end on the demo recipe and on generated bad input: shards, ledger, manifest, determinism."""
import json
import shutil
from collections import Counter

import numpy as np
import pyarrow.parquet as pq
import pytest

from curation.commands.run import run
from curation.core.record import StepStats
from curation.errors import ConservationError, VerifyError
from curation.ledger import query
from curation.ledger.conservation import check_conservation
from curation.mixture.manifests import megatron_blend, verify_manifest
from tests.conftest import REPO, TEXT_DEMO, english_doc, make_recipe, write_jsonl
from tests.outputs import _files, _ledger_rows

pytestmark = pytest.mark.slow


def test_demo_run_verifies_and_balances(text_run):
    out = text_run.out
    assert sorted(p.name for p in (out / "manifests").glob("*.json")) == [
        "cooldown.json", "long-context-4k.json", "stage1.json"]
    manifest = out / "manifests" / "stage1.json"
    lines = verify_manifest(manifest)
    assert len(lines) == 4 and lines[-1].startswith("megatron hand-off (packed): 1 prefix(es)")
    verify_manifest(out / "manifests" / "cooldown.json")
    lc = json.loads((out / "manifests" / "long-context-4k.json").read_text())
    verify_manifest(out / "manifests" / "long-context-4k.json")
    assert [b["upper"] for b in lc["long_context"]["buckets"]] == [1024, 2048, 4096]
    assert lc["long_context"]["buckets"][-1]["topup_tokens"] > 0 and lc["long_context"]["fill"] > 0.9
    m = json.loads(manifest.read_text())
    assert m["vocabulary"]["id"] == "curate-demo-v1" and m["recipe_fingerprint"] == text_run.plan.recipe.fingerprint
    assert [s["name"] for s in m["sources"]] == ["web_en", "c4_en", "web_de"]
    # the Megatron hand-off: the packed prefix alone, one sample per sequence of the plan's tokens
    assert m["blend"] == ["../megatron/stage1/packed"] and m["megatron"]["mode"] == "packed"
    assert m["samples"] == -(-sum(s["plan"]["tokens"] for s in m["sources"]) // m["seq_length"])
    cols, rows = query(out / "ledger", "SELECT source, records_in, records_out + dropped + quarantined, "
                                       "step FROM steps")
    assert rows and all(r[1] == r[2] for r in rows)
    # every source reads its records and keeps some of them; filters really removed documents
    funnel = {r[0]: r for r in query(out / "ledger", "SELECT * FROM funnel")[1]}
    assert set(funnel) == {"web_en", "c4_en", "web_de"}
    assert all(0 < f[2] < f[1] for f in funnel.values())
    # planted re-crawls: near duplicates found; each cluster keeps its best-scored copy (`keep: highest_quality`)
    clusters = query(out / "ledger", "SELECT cluster, sources, size, members FROM clusters")[1]
    assert len(clusters) >= 6 and all(size == 2 for _, _, size, _ in clusters)
    assert any(sources == ["c4_en", "web_en"] for _, sources, _, _ in clusters)
    score = {f"{src}/{r['id']}": json.loads(r["meta"])["quality_score"] for src in ("web_en", "c4_en", "web_de")
             for f in (out / "processed" / src).glob("*.parquet")
             for r in pq.read_table(f, columns=["id", "meta"]).to_pylist()}
    assert all(score[kept] == max(score[m] for m in members) for kept, _, _, members in clusters)
    drops = query(out / "ledger", "SELECT DISTINCT step FROM drops")[1]
    assert {"language", "gopher_quality", "gopher_repetition", "length", "near_dedup", "select"} <= \
        {d[0] for d in drops}
    for t in ("quality_thresholds", "quality_selected", "quality_histogram", "toxicity"):
        assert query(out / "ledger", f"SELECT count(*) FROM {t}")[1][0][0] > 0, t
    assert (out / "reports" / "quality.png").read_bytes()[:4] == b"\x89PNG"
    assert (out / "reports" / "index.html").stat().st_size > 2000
    assert (out / "reports" / "flow.png").read_bytes()[:4] == b"\x89PNG"
    assert (out / "reports" / "funnel.png").read_bytes()[:4] == b"\x89PNG"


def test_megatron_core_reads_the_shards_and_the_packed_hand_off(text_run):
    from megatron.core.datasets.blended_megatron_dataset_builder import (
        BlendedMegatronDatasetBuilder,
    )
    from megatron.core.datasets.gpt_dataset import GPTDataset, GPTDatasetConfig
    from megatron.core.datasets.indexed_dataset import IndexedDataset

    manifest = text_run.out / "manifests" / "stage1.json"
    m = json.loads(manifest.read_text())
    for src in m["sources"]:
        ds = IndexedDataset(str(manifest.parent / src["prefix"]))
        assert len(ds) == src["documents"]
        assert int(ds.sequence_lengths.sum()) == src["tokens"]["total"]
        assert all(ds[i][-1] == m["vocabulary"]["eod"] for i in range(len(ds)))
    prefixes, weights = megatron_blend(manifest)
    assert weights is None and len(prefixes) == 1                  # the packed hand-off: one prefix
    stage = IndexedDataset(prefixes[0])
    n = m["samples"]
    assert len(stage) == 1 and int(stage.sequence_lengths[0]) == n * m["seq_length"] + 1
    planned = sum(s["plan"]["tokens"] for s in m["sources"] if "plan" in s)
    assert (n - 1) * m["seq_length"] < planned <= n * m["seq_length"]

    class Tokenizer:
        vocab_size = m["megatron"]["tokenizer"]["padded_vocab_size"]
        eod = m["megatron"]["tokenizer"]["eod"]
        pad = m["megatron"]["tokenizer"]["pad"]
        unique_identifiers = {"vocabulary": m["vocabulary"]["id"]}  # noqa: RUF012 - megatron-core reads it, never writes

    config = GPTDatasetConfig(random_seed=1234, sequence_length=m["seq_length"], blend=(prefixes, weights),
                              split="1,0,0", tokenizer=Tokenizer(), reset_position_ids=False,
                              reset_attention_mask=False, eod_mask_loss=True, path_to_cache=None,
                              mid_level_dataset_surplus=0.005)
    train, _, _ = BlendedMegatronDatasetBuilder(GPTDataset, [n, 0, 0], lambda: True, config).build()
    assert len(train) == n                                         # one epoch of the stage's sequences
    assert train[0]["tokens"].shape[0] == m["seq_length"]


def test_ray_with_two_workers_writes_the_local_executors_bytes(text_run, tmp_path, ray_local, monkeypatch):
    """The local executor runs one task at a time in this process; two Ray workers run them at once, in other
    processes, in the order they finish (one Ray worker, once tested here too, adds neither difference)."""
    import curation.runtime.ray_executor as ray_executor
    # every list of every node through the object store (`ray_executor.SHIP_ONCE`), as at scale
    monkeypatch.setattr(ray_executor, "SHIP_ONCE", 1)
    out = tmp_path / "w2"
    res = run(TEXT_DEMO, out, workers=2, progress=False, executor="ray")
    assert text_run.executor == "local" and res.executor == "ray"
    globs = ("tokenized/**/*.bin", "tokenized/**/*.idx", "manifests/*.json", "processed/**/*.parquet",
             "work/*/drops/**/*.parquet", "work/minhash/*.parquet", "work/minhash/**/*.npy")
    a, b = _files(text_run.out, *globs), _files(out, *globs)
    assert a.keys() == b.keys() and len(a) >= 8 + 8 * 3 + 8 * 2 + 3 * 2 + 1
    assert [k for k in a if a[k] != b[k]] == []
    assert _ledger_rows(text_run.out) == _ledger_rows(out)
    for name in ("sources", "drops", "tokens", "quarantine", "inputs"):   # runs: start, end, host differ
        assert (text_run.out / "ledger" / f"{name}.parquet").read_bytes() == \
            (out / "ledger" / f"{name}.parquet").read_bytes()


def test_a_packed_hand_off_in_bounded_prefixes_is_written_by_ray_tasks_and_holds_the_same_stream(
        text_run, tmp_path, ray_local):
    """`shards.max_handoff_bytes`: the text demo's packed hand-off in prefixes of at most 16,384 tokens, each
    written by a Ray task (the executor stays open through the finish). Together they hold the one-prefix
    hand-off's sequences in order, each prefix ends with the next one's first token, `curate verify` passes,
    and the shards and the ledger's other tables are the local run's."""
    from curation.mixture.megatron_packed import prefix_names

    recipe = tmp_path / "recipes" / "text.yaml"
    recipe.parent.mkdir()
    for folder in ("demo", "classifiers"):   # what the text recipe names, relative to itself
        (recipe.parent / folder).symlink_to(REPO / "recipes" / folder)
    (tmp_path / "tokenizers").symlink_to(REPO / "tokenizers")
    recipe.write_text(TEXT_DEMO.read_text() + "\nshards: {max_handoff_bytes: 65536}\n")
    res = run(recipe, tmp_path / "out", workers=2, progress=False, executor="ray")
    seq = json.loads((text_run.out / "manifests" / "stage1.json").read_text())["seq_length"]
    one = json.loads((text_run.out / "manifests" / "stage1.json").read_text())["megatron"]
    many = json.loads((res.out / "manifests" / "stage1.json").read_text())["megatron"]
    k = [p["sequences"] for p in many["prefixes"]]
    assert len(k) > 2 and max(k) * seq + 1 <= 16384 and many["max_prefix_tokens"] == 16384
    assert [p["name"] for p in many["prefixes"]] == prefix_names(len(k)) and sum(k) == one["train_samples"]
    assert many["draws"] == one["draws"]
    whole = np.fromfile(text_run.out / "megatron" / "stage1" / "packed.bin", dtype=np.int32)
    parts = [np.fromfile(res.out / "megatron" / "stage1" / f"{p['name']}.bin", dtype=np.int32) for p in many["prefixes"]]
    assert np.array_equal(np.concatenate([q[:-1] for q in parts]), whole[:-1])   # the same sequences, in order
    assert [int(q[-1]) for q in parts[:-1]] == [int(q[0]) for q in parts[1:]] and parts[-1][-1] == whole[-1]
    verify_manifest(res.out / "manifests" / "stage1.json")
    globs = ("tokenized/**/*.bin", "tokenized/**/*.idx", "work/*/drops/**/*.parquet")
    assert _files(text_run.out, *globs) == _files(res.out, *globs)


def test_rerun_skips_completed_tasks_and_finishes_the_rest(text_run, tmp_path):
    out = tmp_path / "resume"
    shutil.copytree(text_run.out, out)
    (out / "tokenized" / "web_de" / "parts" / "00001.bin").unlink()      # a task that crashed half-way
    (out / "work" / "markers" / "merge" / "c4_en.json").unlink()         # a task that never finished
    res = run(TEXT_DEMO, out, progress=False)
    # tokenize web_de/00001 and merge c4_en run again; web_de's merged shard is still current
    assert (res.executed, res.skipped) == (2, len(res.plan.nodes()) - 2)
    globs = ("tokenized/*/*.bin", "tokenized/*/*.idx", "manifests/*.json")
    assert _files(out, *globs) == _files(text_run.out, *globs)
    verify_manifest(out / "manifests" / "stage1.json")


def test_verify_catches_changed_shards_and_ledger(text_run, tmp_path):
    out = tmp_path / "tampered"
    shutil.copytree(text_run.out, out)
    manifest = out / "manifests" / "stage1.json"
    binfile = out / "tokenized" / "c4_en" / "c4_en.bin"
    data = bytearray(binfile.read_bytes())
    data[8] ^= 0xFF
    binfile.write_bytes(bytes(data))
    with pytest.raises(VerifyError, match=r"c4_en: .*c4_en.bin sha256 differs"):
        verify_manifest(manifest)
    binfile.write_bytes(bytes(data[:-4]))
    with pytest.raises(VerifyError, match=r"c4_en: .*c4_en.bin has \d+ bytes, manifest says"):
        verify_manifest(manifest)
    shutil.copy(text_run.out / "tokenized" / "c4_en" / "c4_en.bin", binfile)
    m = json.loads(manifest.read_text())
    m["sources"][0]["tokens"]["total"] += 1
    manifest.write_text(json.dumps(m))
    with pytest.raises(VerifyError, match=r"web_en: total = \d+ in the shard, manifest says"):
        verify_manifest(manifest)
    m["sources"][0]["tokens"]["total"] -= 1
    m["sources"][0]["share"] += 0.01
    manifest.write_text(json.dumps(m))
    with pytest.raises(VerifyError, match=r"web_en: share .* does not recompute from effective tokens"):
        verify_manifest(manifest)


def test_bad_input_is_quarantined_and_counted(tmp_path):
    data = tmp_path / "data"
    good = [{"id": f"g{i}", "text": english_doc(i)} for i in range(6)]
    write_jsonl(data / "ok.jsonl.gz", good + [{"id": "dup", "text": english_doc(0)}], gz=True)
    (data / "broken.jsonl").write_bytes(b'{"id": "x1", "text": "caf\xe9 au lait"}\n{"id": "x2", "text": \n'
                                        b'{"id": "x3"}\n' + json.dumps({"id": "x4", "text": english_doc(9)}).encode()
                                        + b"\n")
    (data / "empty.jsonl").write_bytes(b"")
    recipe = make_recipe(tmp_path, {"a": sorted(data.glob("*"))}, filters="[{type: length, min_words: 20}]")
    res = run(recipe, tmp_path / "out", progress=False)
    out = res.out
    q = {(r["step"], r["reason"]): r["records"] for r in res.rows["quarantine"]}
    assert q == {("read", "invalid_utf8"): 1, ("read", "malformed_json"): 1, ("read", "missing_text"): 1,
                 ("read", "empty_file"): 1}
    drops = {(r["step"], r["reason"]): r["records"] for r in res.rows["drops"]}
    assert drops == {("exact_dedup", "exact_duplicate"): 1}
    assert res.rows["tokens"][0]["documents"] == 6 + 1  # six good + x4; the copy of g0 removed
    entries = [json.loads(line) for p in sorted((out / "quarantine" / "a").glob("*.jsonl"))
               for line in p.read_text().splitlines()]
    assert sorted(e["reason"] for e in entries) == ["empty_file", "invalid_utf8", "malformed_json", "missing_text"]
    assert all(e["detail"] for e in entries)
    read = next(r for r in res.rows["steps"] if r["step"] == "read")
    assert (read["records_in"], read["records_out"], read["quarantined"]) == (7 + 4 + 1, 7 + 1, 4)
    verify_manifest(out / "manifests" / "pretrain.json")  # a recipe without stages gets one: pretrain
    tokens = np.fromfile(out / "tokenized" / "a" / "a.bin", dtype=np.int32)
    assert tokens.size == res.rows["tokens"][0]["total_tokens"]


def test_conservation_check_names_the_broken_step():
    ok = StepStats("read", 5, 5)
    bad = StepStats("length", 5, 3, Counter({"too_few_words": 1}))
    with pytest.raises(ConservationError, match=r"source 's' shard 00000 step 'length': in=5 but out=3"):
        check_conservation("s", "00000", [ok, bad])
    with pytest.raises(ConservationError, match=r"step 'read' emitted 5 records but 'length' received 4"):
        check_conservation("s", "00000", [ok, StepStats("length", 4, 4)])


@pytest.mark.slow
def test_committed_text_manifests_are_what_the_text_demo_writes(text_run):
    """The examples in manifests/text are reproducible byte for byte, from any checkout location."""
    for name in ("stage1", "cooldown", "long-context-4k"):
        committed = (REPO / "manifests" / "text" / f"{name}.json").read_bytes()
        assert (text_run.out / "manifests" / f"{name}.json").read_bytes() == committed, \
            f"manifests/text/{name}.json is stale: rerun recipes/text.yaml and copy its manifests/ into manifests/text/"
