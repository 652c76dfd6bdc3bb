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
    section = write_handoff(out, out / "manifests", "s", 4, [a, b], None, VOCAB)
    pa, pb = section["prefixes"]
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
    data_args = (out / "megatron" / "s" / "data_args.txt").read_text().split()
    assert data_args == ["4", f"{out}/megatron/s/a", "1", f"{out}/tokenized/b/b"]
    per_split = json.loads((out / "megatron" / "s" / "per_split_data_args.json").read_text())
    assert per_split == {"train": data_args, "valid": None, "test": None}
    args = (out / "megatron" / "s" / "args.txt").read_text().split("\n")
    assert args[args.index("--vocab-size") + 1] == "127" and args[args.index("--train-samples") + 1] == "5"
    (out / "megatron" / "s" / "stale.idx").write_bytes(b"x")   # an earlier plan's prefix is removed
    write_handoff(out, out / "manifests", "s", 4, [a, b], None, VOCAB)
    assert not (out / "megatron" / "s" / "stale.idx").exists()


def test_long_context_plans_are_packed_into_sequences_of_exactly_seq_length(tmp_path):
    out = tmp_path / "out"
    docs = [[1, 2, 0], [3, 4, 5, 6, 0], [7, 0], [8, 9, 10, 0]]
    a = _source(out, "a", docs, [1, 1, 0, 1])
    packing = np.asarray([[0, 1, 0], [0, 3, 1], [0, 0, 1]], dtype=np.int64)   # (source, document, sequence)
    section = write_handoff(out, out / "manifests", "lc", 8, [a], packing, VOCAB)
    (p,) = section["prefixes"]
    pad = tokenizer_settings(VOCAB)["pad"]
    assert pad == 127 == tokenizer_settings(VOCAB)["eod"]                  # Megatron's eod: the last padding row
    flat = np.fromfile(out / "megatron" / "lc" / "packed.bin", dtype=np.int32).reshape(-1, 8)
    assert flat.tolist() == [[3, 4, 5, 6, 0, pad, pad, pad], [8, 9, 10, 0, 1, 2, 0, pad]]
    assert (p["packed_sequences"], p["document_tokens"], p["pad_tokens"], p["sequences"]) == (2, 12, 4, 1)
    assert (out / "megatron" / "lc" / "data_args.txt").read_text().split() == [f"{out}/megatron/lc/packed"]
    assert "--eod-mask-loss" in (out / "megatron" / "lc" / "args.txt").read_text().split()


def test_tokenizer_settings_keep_our_padded_rows_and_an_eod_no_tokenizer_emits():
    t = tokenizer_settings({"size": 266440, "padded_size": 266752, "eod": 0})
    assert (t["vocab_size"], t["padded_vocab_size"], t["eod"], t["document_end"]) == (266751, 266752, 266751, 0)
    full = tokenizer_settings({"size": 256, "padded_size": 256, "eod": 0})   # no padding row: eod one past
    assert full["eod"] == 256 and full["padded_vocab_size"] == 384


def _megatron_draws(manifest: Path, cache: Path, per_split: bool = False):
    """Build the stage as Megatron-LM would from the hand-off's files; returns (blended or GPT dataset,
    prefix names, per-prefix sample counts, samples drawn per prefix as lists of (dataset, sample) ids)."""
    from megatron.core.datasets.blended_megatron_dataset_builder import (
        BlendedMegatronDatasetBuilder,
    )
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
    if per_split:                       # `--per-split-data-args-path`, as Megatron-LM reads it
        spec = json.loads((out / mg["dir"] / "per_split_data_args.json").read_text())
        kw["blend_per_split"] = [get_blend_from_list(spec[k]) for k in ("train", "valid", "test")]
    else:                               # `--data-args-path` and `--split`
        kw["blend"] = get_blend_from_list((out / mg["dir"] / "data_args.txt").read_text().split())
        kw["split"] = mg["split"]
    n = m["samples"]
    train = BlendedMegatronDatasetBuilder(GPTDataset, [n, 0, 0], lambda: True, GPTDatasetConfig(**kw)).build()[0]
    if hasattr(train, "dataset_index"):
        which = [(int(train.dataset_index[i]), int(train.dataset_sample_index[i])) for i in range(n)]
        return m, [train.datasets[d] for d in range(len(train.datasets))], which
    return m, [train], [(0, i) for i in range(n)]


@pytest.mark.slow
def test_megatron_core_draws_each_demo_stage_as_planned(demo_run, tmp_path):
    """For stage1, cooldown and long-context-4k: megatron-core's BlendedMegatronDatasetBuilder + GPTDataset on
    the hand-off, asked for the stage's samples, draws every source's planned tokens within 1% (one sequence
    for sources under 100 sequences), never more occurrences of a document than planned, and for the
    long-context stage only selected documents, whole, one packed sequence per sample."""
    import torch.distributed as dist

    dist.init_process_group("gloo", init_method=f"file://{tmp_path}/pg", rank=0, world_size=1)
    try:
        tables = {}
        for stage in ("stage1", "cooldown", "long-context-4k"):
            manifest = demo_run.out / "manifests" / f"{stage}.json"
            m, datasets, which = _megatron_draws(manifest, tmp_path / stage)
            seq = m["seq_length"]
            planned = {s["name"]: s["plan"]["tokens"] for s in m["sources"] if "plan" in s}
            drawn = dict.fromkeys(planned, 0)
            if m["megatron"]["packed"]:
                packing = np.load(manifest.parent / m["long_context"]["packing"]["path"])
                names = [s["name"] for s in m["sources"]]
                lengths = {s["name"]: read_index(manifest.parent / f"{s['prefix']}.idx")[1] for s in m["sources"]}
                selected = {(names[s], d) for s, d, _ in packing}
                seen = set()
                for _, sample in which:
                    tokens, docs = datasets[0]._query_document_sample_shuffle_indices(sample)
                    assert len(docs) == 2 and tokens.size == seq + 1       # one packed sequence (+ the next's first label)
                    assert docs[0] not in seen
                    seen.add(int(docs[0]))
                    for s, d, _ in packing[packing[:, 2] == docs[0]]:
                        assert (names[s], int(d)) in selected
                        drawn[names[s]] += int(lengths[names[s]][d])
                assert len(seen) == m["long_context"]["sequences"] - 1    # all packed sequences but Megatron's last
            else:
                for i, p in enumerate(m["megatron"]["prefixes"]):
                    got = [sample for d, sample in which if d == i]
                    drawn[p["name"]] = len(got) * seq
                    counts = np.load(manifest.parent / next(s for s in m["sources"] if s["name"] == p["name"])["plan"]["path"])
                    occ = occurrences(counts)
                    used = set()
                    for sample in got:
                        used.update(int(x) for x in datasets[i]._query_document_sample_shuffle_indices(sample)[1])
                    docs = np.bincount(occ[sorted(used)], minlength=counts.size)
                    assert (docs <= counts).all()                          # never more often than planned
                    assert len(used) >= occ.size - 1                       # every occurrence of one pass but the last
            for name, want in planned.items():
                tol = max(0.01 * want, seq) if want < 100 * seq else 0.01 * want
                assert abs(drawn[name] - want) <= tol, (stage, name, drawn[name], want)
            tables[stage] = {name: (planned[name], drawn[name]) for name in planned}
        m, _, which = _megatron_draws(demo_run.out / "manifests" / "stage1.json", tmp_path / "split", per_split=True)
        assert [d for d, _ in which] == [d for d, _ in _megatron_draws(demo_run.out / "manifests" / "stage1.json",
                                                                      tmp_path / "again")[2]]
    finally:
        dist.destroy_process_group()
    lines = ["| stage | source | planned tokens | drawn by megatron-core | difference |", "|---|---|---:|---:|---:|"]
    for stage, rows in tables.items():
        lines += [f"| {stage} | {n} | {p:,} | {d:,} | {100 * (d - p) / p:+.2f}% |" for n, (p, d) in rows.items()]
    print("\n" + "\n".join(lines))
