"""The Megatron-LM hand-off: stage indices over the source `.bin`, packed long-context sequences, data-args
files; and megatron-core itself, pointed at the hand-off of every demo stage, drawing exactly the plan."""
from __future__ import annotations

import json
import os
from argparse import Namespace
from pathlib import Path

import numpy as np
import pytest

from curation.core.hashing import sha256_file
from curation.mixture.megatron import occurrences, tokenizer_settings, write_handoff
from curation.mixture.sampling import save_counts
from curation.shards import IndexedWriter, read_index

VOCAB = {"size": 100, "padded_size": 128, "eod": 0}


def _shard(prefix: Path, docs: list[list[int]]) -> None:
    w = IndexedWriter(prefix)
    for d in docs:
        w.add(np.asarray(d, dtype=np.int32))
    w.close()


def _source(out: Path, name: str, docs: list[list[int]], counts: list[int], stage: str = "s") -> dict:
    prefix = out / "tokenized" / name / name
    _shard(prefix, docs)
    mdir = out / "manifests"
    plan = save_counts(mdir / "plans" / stage / f"{name}.npy", np.asarray(counts), np.asarray([len(d) for d in docs]))
    return {"name": name, "prefix": f"../tokenized/{name}/{name}", "effective_tokens": plan["tokens"],
            "files": [{"path": f"../tokenized/{name}/{name}.bin", "sha256": sha256_file(Path(f"{prefix}.bin"))}],
            "plan": {"path": f"plans/{stage}/{name}.npy", **plan}}


def test_a_stage_index_lists_every_planned_occurrence_and_reads_the_sources_bin(tmp_path):
    out = tmp_path / "out"
    docs = [[1, 2, 0], [3, 4, 5, 6, 0], [7, 0], [8, 9, 10, 0]]
    a = _source(out, "a", docs, [2, 0, 1, 3])
    b = _source(out, "b", [[11, 12, 0], [13, 0]], [1, 1])      # exactly one epoch: the source itself
    section = write_handoff(out, out / "manifests", "s", 4, [a, b], None, VOCAB, mode="blend")
    pa, pb = section["prefixes"]
    assert section["mode"] == "blend" and not section["packed"]
    assert pb["prefix"] == "../tokenized/b/b" and pb["files"] == []
    assert pa["prefix"] == "../megatron/s/a" and (pa["documents"], pa["occurrences"]) == (3, 6)
    hand = out / "megatron" / "s" / "a"
    assert os.path.samefile(f"{hand}.bin", out / "tokenized" / "a" / "a.bin")   # a link: no tokens copied
    _, lengths, pointers, doc_idx = read_index(Path(f"{hand}.idx"))
    assert lengths.tolist() == [3, 3, 2, 4, 4, 4] and doc_idx.tolist() == list(range(7))
    flat = np.fromfile(f"{hand}.bin", dtype=np.int32)
    drawn = [flat[p // 4:p // 4 + n].tolist() for p, n in zip(pointers, lengths)]
    assert drawn == [docs[i] for i in occurrences(np.asarray([2, 0, 1, 3]))]
    assert pa["tokens"] == 20 and pa["sequences"] == (20 - 1) // 4 and pb["sequences"] == (5 - 1) // 4
    assert section["train_samples"] == pa["sequences"] + pb["sequences"]
    assert section["draws"] == [{"name": "a", "planned_tokens": 20, "drawn_tokens": 16},
                                {"name": "b", "planned_tokens": 5, "drawn_tokens": 4}]
    data_args = (out / "megatron" / "s" / "data_args.txt").read_text().split()
    assert data_args == ["4", f"{out}/megatron/s/a", "1", f"{out}/tokenized/b/b"]
    per_split = json.loads((out / "megatron" / "s" / "per_split_data_args.json").read_text())
    assert per_split == {"train": data_args, "valid": None, "test": None}
    args = (out / "megatron" / "s" / "args.txt").read_text().split("\n")
    assert args[args.index("--vocab-size") + 1] == "127" and args[args.index("--train-samples") + 1] == "5"
    (out / "megatron" / "s" / "stale.idx").write_bytes(b"x")   # an earlier plan's prefix is removed
    write_handoff(out, out / "manifests", "s", 4, [a, b], None, VOCAB, mode="blend")
    assert not (out / "megatron" / "s" / "stale.idx").exists()


def test_a_blend_lists_a_source_under_one_sequence_as_not_drawable_and_draws_it_0(tmp_path):
    out = tmp_path / "out"
    a = _source(out, "a", [[1, 2, 3, 4, 5, 6, 7, 8, 9, 0]], [1])
    small = _source(out, "small", [[11, 12, 0]], [1])               # 3 tokens < seq_length + 1 = 5
    section = write_handoff(out, out / "manifests", "s", 4, [a, small], None, VOCAB, mode="blend")
    assert [p["name"] for p in section["prefixes"]] == ["a"]
    assert section["not_drawable"] == [{"name": "small", "tokens": 3, "reason": "fewer than 5 planned tokens: "
                                        "not one sample of seq_length + 1"}]
    assert section["draws"][1] == {"name": "small", "planned_tokens": 3, "drawn_tokens": 0}
    packed = write_handoff(out, out / "manifests", "s", 4, [a, small], None, VOCAB, stage_fp="fp")
    assert packed["not_drawable"] == [] and [d["drawn_tokens"] for d in packed["draws"]] == [10, 3]


def test_an_ordinary_stage_is_packed_in_the_plans_order_into_one_document_of_p_sequences_and_a_token(tmp_path):
    from curation.mixture.sequences import plan_order

    out = tmp_path / "out"
    docs = [[1, 2, 0], [3, 4, 5, 6, 0], [7, 0]]
    a = _source(out, "a", docs, [2, 0, 1])
    b = _source(out, "b", [[11, 12, 13, 0]], [1])
    section = write_handoff(out, out / "manifests", "s", 4, [a, b], None, VOCAB, stage_fp="fp")
    pad = tokenizer_settings(VOCAB)["pad"]
    src, doc = plan_order("fp", [np.asarray([2, 0, 1]), np.asarray([1])])
    stream = [t for k, d in zip(src, doc) for t in ([docs, [[11, 12, 13, 0]]][k][d])]
    assert len(stream) == 12
    (p,) = section["prefixes"]
    assert (p["name"], p["sequences"], p["tokens"]) == ("packed", 3, 3 * 4 + 1)
    _, lengths, pointers, _ = read_index(out / "megatron" / "s" / "packed.idx")
    assert lengths.tolist() == [13] and pointers.tolist() == [0]        # one document: Megatron cannot reorder
    assert np.fromfile(out / "megatron" / "s" / "packed.bin", dtype=np.int32).tolist() == stream + [pad]
    assert section["train_samples"] == 3 and section["draws"] == [
        {"name": "a", "planned_tokens": 8, "drawn_tokens": 8}, {"name": "b", "planned_tokens": 4, "drawn_tokens": 4}]
    assert (out / "megatron" / "s" / "data_args.txt").read_text().split() == [f"{out}/megatron/s/packed"]
    assert "--eod-mask-loss" in (out / "megatron" / "s" / "args.txt").read_text().split()


def test_long_context_plans_are_packed_into_sequences_of_exactly_seq_length(tmp_path):
    out = tmp_path / "out"
    docs = [[1, 2, 0], [3, 4, 5, 6, 0], [7, 0], [8, 9, 10, 0]]
    a = _source(out, "a", docs, [1, 1, 0, 1])
    packing = np.asarray([[0, 1, 0], [0, 3, 1], [0, 0, 1]], dtype=np.int64)   # (source, document, sequence)
    section = write_handoff(out, out / "manifests", "lc", 8, [a], packing, VOCAB, mode="blend")
    (p,) = section["prefixes"]
    pad = tokenizer_settings(VOCAB)["pad"]
    assert pad == 127 == tokenizer_settings(VOCAB)["eod"]                  # Megatron's eod: the last padding row
    flat = np.fromfile(out / "megatron" / "lc" / "packed.bin", dtype=np.int32)
    assert flat[:16].reshape(-1, 8).tolist() == [[3, 4, 5, 6, 0, pad, pad, pad], [8, 9, 10, 0, 1, 2, 0, pad]]
    assert flat[16:].tolist() == [pad]                                     # the label of the last sequence
    assert section["mode"] == "packed"                                     # long context: packed whatever is asked
    assert (p["sequences"], p["tokens"], section["train_samples"]) == (2, 17, 2)
    assert section["draws"] == [{"name": "a", "planned_tokens": 12, "drawn_tokens": 12}]
    assert (out / "megatron" / "lc" / "data_args.txt").read_text().split() == [f"{out}/megatron/lc/packed"]
    assert "--eod-mask-loss" in (out / "megatron" / "lc" / "args.txt").read_text().split()


def test_a_stage_over_one_megatron_document_is_split_into_prefixes_each_ending_with_the_next_ones_first_token(
        tmp_path):
    from curation.mixture.megatron_packed import chunk_sizes, expected_digests, write_packed

    assert chunk_sizes(13, 4, max_tokens=4 * 5 + 1) == [5, 4, 4] and chunk_sizes(0, 4) == []
    big = chunk_sizes(10**6, 4096)                                          # 4.1e9 tokens: over int32
    assert len(big) == 2 and sum(big) == 10**6 and max(big) * 4096 + 1 <= 2**31 - 1
    seqs = [(np.full(4, 10 + j, dtype=np.int32), {0: 4}) for j in range(5)]
    written, held = write_packed(tmp_path, iter(seqs), [3, 2], 4, 99)
    assert [(w["name"], w["sequences"], w["tokens"]) for w in written] == [("packed-000", 3, 13), ("packed-001", 2, 9)]
    assert held == {0: 20}
    first = np.fromfile(tmp_path / "packed-000.bin", dtype=np.int32).tolist()
    assert first == [10] * 4 + [11] * 4 + [12] * 4 + [13]                # ends with the next prefix's first token
    assert np.fromfile(tmp_path / "packed-001.bin", dtype=np.int32).tolist() == [13] * 4 + [14] * 4 + [99]
    want, _ = expected_digests(iter(seqs), [3, 2], 4, 99)
    assert want["packed-000"] == (sha256_file(tmp_path / "packed-000.bin"), sha256_file(tmp_path / "packed-000.idx"))
    # hashed as written: the manifest's digest without reading the stage's tokens again
    assert [w["bin_sha256"] for w in written] == [sha256_file(tmp_path / f"{w['name']}.bin") for w in written]


def test_tokenizer_settings_keep_our_padded_rows_and_an_eod_no_tokenizer_emits():
    t = tokenizer_settings({"size": 266440, "padded_size": 266752, "eod": 0})
    assert (t["vocab_size"], t["padded_vocab_size"], t["eod"], t["document_end"]) == (266751, 266752, 266751, 0)
    full = tokenizer_settings({"size": 256, "padded_size": 256, "eod": 0})   # no padding row: eod one past
    assert full["eod"] == 256 and full["padded_vocab_size"] == 384


def _blend_order(manifest: Path, cache: Path, per_split: bool):
    """The blended dataset's (dataset, sample) order, from `--data-args-path` or `--per-split-data-args-path`."""
    from megatron.core.datasets.blended_megatron_dataset_builder import BlendedMegatronDatasetBuilder
    from megatron.core.datasets.gpt_dataset import GPTDataset, GPTDatasetConfig
    from megatron.core.datasets.utils import get_blend_from_list
    from megatron.core.tokenizers.text.utils.build_tokenizer import build_tokenizer

    m = json.loads(manifest.read_text())
    mg, out = m["megatron"], manifest.resolve().parent.parent
    tok = build_tokenizer(Namespace(tokenizer_type=mg["tokenizer"]["tokenizer_type"],
                                    vocab_size=mg["tokenizer"]["vocab_size"]))
    assert tok.vocab_size == mg["tokenizer"]["padded_vocab_size"] and tok.eod == mg["tokenizer"]["eod"]
    kw = {"random_seed": 1234, "sequence_length": m["seq_length"], "tokenizer": tok, "reset_position_ids": False,
          "reset_attention_mask": False, "eod_mask_loss": False, "path_to_cache": str(cache),
          "mid_level_dataset_surplus": 0.005}
    if per_split:
        spec = json.loads((out / mg["dir"] / "per_split_data_args.json").read_text())
        kw["blend_per_split"] = [get_blend_from_list(spec[k]) for k in ("train", "valid", "test")]
    else:
        kw["blend"] = get_blend_from_list((out / mg["dir"] / "data_args.txt").read_text().split())
        kw["split"] = mg["split"]
    n = m["samples"]
    train = BlendedMegatronDatasetBuilder(GPTDataset, [n, 0, 0], lambda: True, GPTDatasetConfig(**kw)).build()[0]
    return [(int(train.dataset_index[i]), int(train.dataset_sample_index[i])) for i in range(n)]


def assert_draws_the_plan(got: dict, seq_length: int, where: str) -> None:
    """The goal of the hand-off: per stage, drawn = planned within one sequence, no planned source at 0;
    packed: every planned token exactly once."""
    planned, drawn = sum(got["planned"].values()), sum(got["drawn"].values())
    assert abs(drawn - planned) <= seq_length, (where, planned, drawn)
    assert all(got["drawn"][s] > 0 for s, n in got["planned"].items() if n > 0), (where, got["drawn"])
    if got["mode"] == "packed":   # every drawn position is a planned token or padding, every planned token drawn
        assert got["drawn"] == got["planned"], (where, got)
        assert got["pad"] == got["train_samples"] * seq_length - planned, (where, got)


@pytest.mark.slow
def test_megatron_core_draws_each_text_demo_stage_as_planned(text_run, tmp_path):
    """Every stage of recipes/text.yaml: megatron-core's BlendedMegatronDatasetBuilder + GPTDataset, built from
    args.txt and asked for its --train-samples, draws every planned token once (packed), the manifest's and
    the ledger's `handoff` numbers are those counts; a blend of the same plan is within one sequence per
    source, and `--per-split-data-args-path` gives the blend's order too."""
    import shutil

    import torch.distributed as dist

    from curation.ledger.store import read_rows
    from tests.megatron_draws import megatron_draws

    dist.init_process_group("gloo", init_method=f"file://{tmp_path}/pg", rank=0, world_size=1)
    try:
        ledger = {(h["stage"], h["source"]): h for h in read_rows(text_run.out / "ledger")["handoff"]}
        for manifest in sorted((text_run.out / "manifests").glob("*.json")):
            m = json.loads(manifest.read_text())
            got = megatron_draws(manifest, tmp_path / m["stage"])
            assert got["mode"] == "packed"
            assert_draws_the_plan(got, m["seq_length"], m["stage"])
            for name, n in got["drawn"].items():
                assert ledger[m["stage"], name]["drawn_tokens"] == n
                assert ledger[m["stage"], name]["planned_tokens"] == got["planned"][name]
        # the same plans as a blend (`handoff: blend`): Megatron's sampling, each source under one sequence short
        out = tmp_path / "blend"
        shutil.copytree(text_run.out, out, symlinks=True)
        for manifest in sorted((out / "manifests").glob("*.json")):
            m = json.loads(manifest.read_text())
            if m["long_context"]:
                continue
            m["megatron"] = write_handoff(out, out / "manifests", m["stage"], m["seq_length"], m["sources"], None,
                                          m["vocabulary"], mode="blend")
            m["samples"] = m["megatron"]["train_samples"]
            manifest.write_text(json.dumps(m))
            got = megatron_draws(manifest, tmp_path / f"blend-{m['stage']}")
            assert got["mode"] == "blend"
            for name, n in got["drawn"].items():
                assert got["planned"][name] - n <= m["seq_length"], (m["stage"], name)
                assert n == next(d["drawn_tokens"] for d in m["megatron"]["draws"] if d["name"] == name)
        stage1 = out / "manifests" / "stage1.json"
        assert _blend_order(stage1, tmp_path / "split", True) == _blend_order(stage1, tmp_path / "again", False)
    finally:
        dist.destroy_process_group()


@pytest.mark.slow   # imports megatron-core (4 s)
@pytest.mark.parametrize("sequences, most", [(13, 5), (40, 7), (31, 4), (6, 2), (9, 9)])
def test_megatron_core_draws_every_sequence_of_a_stage_split_over_prefixes_once(tmp_path, sequences, most):
    """A stage over one Megatron document (2^31 - 1 tokens; here `most` sequences) is split into prefixes
    weighted by their sequence counts: megatron-core's blended dataset, asked for all of them, draws each
    sequence exactly once (each prefix's samples from its first epoch, aligned with its sequences)."""
    import torch.distributed as dist
    from megatron.core.datasets.blended_megatron_dataset_builder import BlendedMegatronDatasetBuilder
    from megatron.core.datasets.gpt_dataset import GPTDataset, GPTDatasetConfig
    from megatron.core.tokenizers.text.utils.build_tokenizer import build_tokenizer

    from curation.mixture.megatron_packed import chunk_sizes, write_packed

    seq = 8
    sizes = chunk_sizes(sequences, seq, max_tokens=most * seq + 1)
    seqs = [(np.asarray([j // 100, j % 100] + [j % 7] * (seq - 2), dtype=np.int32), {0: seq}) for j in range(sequences)]
    written, held = write_packed(tmp_path, iter(seqs), sizes, seq, 127)
    assert held == {0: sequences * seq} and len(written) == -(-sequences // most)
    paths = [str(tmp_path / w["name"]) for w in written]
    blend = (paths, None) if len(paths) == 1 else (paths, [float(w["sequences"]) for w in written])
    dist.init_process_group("gloo", init_method=f"file://{tmp_path}/pg", rank=0, world_size=1)
    try:
        config = GPTDatasetConfig(random_seed=1234, sequence_length=seq, reset_position_ids=False,
                                  reset_attention_mask=False, eod_mask_loss=True, path_to_cache=str(tmp_path / "cache"),
                                  mid_level_dataset_surplus=0.005, blend=blend, split="100,0,0",
                                  tokenizer=build_tokenizer(Namespace(tokenizer_type="NullTokenizer", vocab_size=127)))
        train = BlendedMegatronDatasetBuilder(GPTDataset, [sequences, 0, 0], lambda: True, config).build()[0]
        if hasattr(train, "dataset_index"):
            samples = [train.datasets[int(train.dataset_index[i])]._query_document_sample_shuffle_indices(
                int(train.dataset_sample_index[i]))[0] for i in range(sequences)]
        else:
            samples = [train._query_document_sample_shuffle_indices(i)[0] for i in range(sequences)]
    finally:
        dist.destroy_process_group()
    drawn = sorted(tuple(s[:seq].tolist()) for s in samples)
    assert drawn == sorted(tuple(s.tolist()) for s, _ in seqs)


@pytest.mark.slow
def test_a_blend_source_megatron_cannot_draw_is_a_warning_a_ledger_flag_and_a_report_note(tmp_path, capsys):
    """`handoff: blend` with a source of fewer than seq_length + 1 planned tokens: never a silent omission.
    The same recipe packed draws it whole."""
    from curation.commands.run import run
    from curation.ledger.store import read_rows
    from curation.mixture.verify import verify_manifest
    from tests.conftest import VOCAB, write_jsonl

    big = write_jsonl(tmp_path / "big.jsonl", [{"id": f"b{i}", "text": f"Document {i} about rivers, hills and "
                                                  f"the weather in spring, number {i}. " * 12} for i in range(12)])
    small = write_jsonl(tmp_path / "small.jsonl", [{"id": "s0", "text": "A short note on tea."}])
    for mode in ("blend", "packed"):
        (tmp_path / f"{mode}.yaml").write_text(f"""name: tiny
vocabulary: {VOCAB}
handoff: {mode}
stages: [{{name: s, seq_length: 256}}]
sources:
  - {{name: big, license: MIT, input: {{paths: [{big}], id_field: id}}}}
  - {{name: small, license: MIT, input: {{paths: [{small}], id_field: id}}}}
""")
        res = run(tmp_path / f"{mode}.yaml", tmp_path / mode, progress=False)
        err = capsys.readouterr().err
        rows = read_rows(tmp_path / mode / "ledger")
        hand = {h["source"]: h for h in rows["handoff"]}
        verify_manifest(res.manifests[0])
        assert hand["small"]["planned_tokens"] > 0 and hand["big"]["drawn_tokens"] > 0
        if mode == "blend":
            assert (hand["small"]["drawn_tokens"], hand["small"]["drawable"]) == (0, False)
            assert "fewer than 257 planned tokens" in hand["small"]["note"]
            assert [f["source"] for f in rows["mixture_flags"] if f["kind"] == "not_drawable"] == ["small"]
            assert "warning: stage s: not_drawable: small:" in err
            assert "not drawn by Megatron" in (tmp_path / mode / "reports" / "index.html").read_text()
        else:
            assert all(h["drawn_tokens"] == h["planned_tokens"] and h["drawable"] for h in hand.values())
            assert "not_drawable" not in err


def _files_of(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir()) if p.suffix in (".bin", ".idx")}


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("long_context", [False, True])
def test_packed_prefixes_written_by_tasks_are_the_prefixes_the_driver_writes(tmp_path, seed, long_context):
    """`shards.max_handoff_bytes` cuts a packed hand-off into prefixes of at most that many tokens; a run's
    executor then writes each prefix in its own task (`megatron.packed_prefix`, from the slice of the plan
    `sequences.chunk_plans` gives it: documents split across prefixes, a prefix starting inside a document).
    Same files, section and draws as the driver writing them in one pass, and the prefixes together hold the
    whole stage's stream, each ending with the next one's first token (`layout`, the one-pass reference)."""
    from curation.mixture.megatron_packed import layout
    from curation.mixture.sequences import stage_sequences
    from curation.runtime.local import LocalExecutor

    rng = np.random.default_rng(seed)
    seq = int(rng.integers(4, 12))
    most = seq * int(rng.integers(1, 4)) + 1   # tokens per prefix: 1 to 3 sequences and the extra token
    corpus = []
    for _ in range(int(rng.integers(1, 4))):
        docs = [list(rng.integers(1, 99, int(rng.integers(1, 3 * seq)))) + [0] for _ in range(int(rng.integers(3, 20)))]
        counts = rng.integers(0, 3, len(docs))
        counts[0] = max(counts[0], 1)
        corpus.append((docs, list(counts)))
    packing = None
    if long_context:   # each planned document that fits in its own bin of `seq` tokens
        rows = [(i, d) for i, (docs, counts) in enumerate(corpus) for d in range(len(docs))
                if counts[d] and len(docs[d]) <= seq]
        packing = np.asarray([(i, d, b) for b, (i, d) in enumerate(rows)], dtype=np.int64).reshape(-1, 3)

    def hand_off(out: Path, by_tasks: bool):
        sources = [_source(out, f"s{i}", docs, counts) for i, (docs, counts) in enumerate(corpus)]
        with LocalExecutor(progress=False) as ex:
            section = write_handoff(out, out / "manifests", "s", seq, sources, packing, VOCAB, stage_fp=f"fp{seed}",
                                    max_tokens=most, tasks=ex.map if by_tasks else None)
        return sources, section, _files_of(out / "megatron" / "s")

    sources, driver, files = hand_off(tmp_path / "driver", False)
    _, tasks, task_files = hand_off(tmp_path / "tasks", True)
    assert task_files == files
    assert len(driver["prefixes"]) >= (1 if long_context and seed == 5 else 2)   # (one bin in that case)
    assert {k: v for k, v in tasks.items() if k != "files"} == {k: v for k, v in driver.items() if k != "files"}
    assert driver["max_prefix_tokens"] == most
    sizes = [p["sequences"] for p in driver["prefixes"]]
    assert all(k * seq + 1 <= max(most, seq + 1) for k in sizes)

    class Sink:
        def __init__(self):
            self.b = b""

        def write(self, x: bytes) -> None:
            self.b += x

    pad = tokenizer_settings(VOCAB)["pad"]
    sinks = [Sink() for _ in sizes]
    layout(stage_sequences(tmp_path / "driver" / "manifests", sources, f"fp{seed}", seq, pad, packing), sizes, pad,
           sinks)
    assert [files[f"{p['name']}.bin"] for p in driver["prefixes"]] == [k.b for k in sinks]


def test_by_default_a_stage_over_one_int32_prefix_is_written_a_prefix_per_task(tmp_path, monkeypatch):
    """Unset `shards.max_handoff_bytes`, a prefix holds up to megatron-core's int32 document length; a stage
    above it (every stage at a billion documents) has each of its prefixes written by a task of the run's
    executor, not by the driver: the cost model counts that copy as tasks (scale_model.py). The bound is made
    small here; the files are the driver's one-pass ones, and no `max_prefix_tokens` enters the manifest."""
    import curation.mixture.megatron as megatron
    from curation.runtime.local import LocalExecutor

    monkeypatch.setattr(megatron, "MAX_DOCUMENT_TOKENS", 4 * 3 + 1)   # three sequences of 4 and the extra token
    docs = [[int(t) for t in range(1 + d, 6 + d)] + [0] for d in range(9)]
    ran = []

    def hand_off(out: Path, tasks):
        sources = [_source(out, "a", docs, [1] * len(docs))]
        section = write_handoff(out, out / "manifests", "s", 4, sources, None, VOCAB, stage_fp="fp", tasks=tasks)
        return section, _files_of(out / "megatron" / "s")

    with LocalExecutor(progress=False) as ex:
        def tasks(fn, calls, phase):
            ran.append((fn.__name__, [key for key, _ in calls], phase))
            return ex.map(fn, calls, phase)
        by_tasks, files = hand_off(tmp_path / "tasks", tasks)
    by_driver, driver_files = hand_off(tmp_path / "driver", None)
    names = [p["name"] for p in by_driver["prefixes"]]
    assert len(names) == 5 and names[0] == "packed-000"               # 54 tokens: 14 sequences in 5 prefixes
    assert ran == [("packed_prefix", [f"handoff/s/{n}" for n in names], "handoff")]
    assert files == driver_files and "max_prefix_tokens" not in by_tasks
    assert {k: v for k, v in by_tasks.items() if k != "files"} == {k: v for k, v in by_driver.items() if k != "files"}
