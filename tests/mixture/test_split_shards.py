"""A shard set split into parts (`shards.merging.split_merge`, `shards.shardset.ShardSet`): the cuts, and
every reader by document index (sequences, both hand-offs, the blend's stage indices, its check) giving what
the same documents as one prefix give."""
from __future__ import annotations

import hashlib
import os
from functools import partial
from pathlib import Path

import numpy as np
import pytest

from curation.core.hashing import sha256_file
from curation.mixture.handoffs import write_stage
from curation.mixture.megatron import blend_of
from curation.mixture.megatron_check import check_handoff
from curation.mixture.sampling import save_counts
from curation.mixture.sequences import stage_sequences
from curation.shards import IndexedWriter, merge, read_index
from curation.shards.formats import StageInput
from curation.shards.merging import plan_cuts, split_merge
from curation.shards.shardset import ShardSet
from tests.mixture.test_megatron_handoff import VOCAB

DOCS = [[1, 2, 0], [3, 4, 5, 6, 0], [7, 0], [8, 9, 10, 11, 12, 13, 14, 15, 0], [16, 0], [17, 18, 0], [19, 0]]


def _parts(folder: Path, groups: list[list[list[int]]]) -> list[Path]:
    """Tokenize-task parts holding `groups` of documents."""
    out = []
    for k, docs in enumerate(groups):
        w = IndexedWriter(folder / "parts" / f"{k:05d}")
        for d in docs:
            w.add(np.asarray(d, dtype=np.int32))
        w.close()
        out.append(folder / "parts" / f"{k:05d}")
    return out


def _docs(prefix: Path) -> list[list[int]]:
    from megatron.core.datasets.indexed_dataset import IndexedDataset

    ds = IndexedDataset(str(prefix))
    return [ds[i].tolist() for i in range(len(ds))]


def test_parts_are_cut_between_documents_and_hold_the_merged_documents_in_order(tmp_path):
    inputs = _parts(tmp_path, [DOCS[:2], DOCS[2:5], [], DOCS[5:]])
    merge(inputs, tmp_path / "one" / "a")
    whole: dict = {}
    written = split_merge(inputs, tmp_path / "split" / "a", 20, whole=whole)    # 5 int32 tokens a part
    assert [p.name for p, _, _ in written] == [f"a.part-{k:05d}" for k in range(len(written))]
    assert [n for _, n, _ in written] == [1, 1, 1, 1, 2, 1] and sum(n for _, n, _ in written) == len(DOCS)
    got = []
    for p, n, hashes in written:
        docs = _docs(p)
        assert len(docs) == n and hashes == {e: sha256_file(Path(f"{p}{e}")) for e in (".bin", ".idx")}
        assert Path(f"{p}.bin").stat().st_size <= 20 or n == 1     # DOCS[3] (9 tokens) is a part of its own
        got += docs
    assert got == DOCS == _docs(tmp_path / "one" / "a")
    shards = ShardSet.on_disk(tmp_path / "split" / "a")
    assert [p for p, _, _ in written] == shards.prefixes
    assert shards.offsets().tolist() == [0, 1, 2, 3, 4, 6, 7]
    assert shards.lengths().tolist() == [len(d) for d in DOCS]
    read, starts = shards.reader(), shards.starts()
    assert [read(int(s), len(d)).tolist() for s, d in zip(starts, DOCS)] == DOCS
    want = [sha256_file(tmp_path / "one" / f"a{e}") for e in (".bin", ".idx")]
    assert [whole[".bin"], whole[".idx"]] == want == shards.unsplit_sha256()


def test_one_part_is_the_merge_byte_for_byte_and_an_empty_set_is_an_idx_alone(tmp_path):
    inputs = _parts(tmp_path, [DOCS[:3], DOCS[3:]])
    merge(inputs, tmp_path / "one" / "a")
    whole: dict = {}
    [(prefix, n, _)] = split_merge(inputs, tmp_path / "big" / "a", 4 * 2**30, whole=whole)
    assert prefix == tmp_path / "big" / "a" and n == len(DOCS)
    for e in (".bin", ".idx"):
        assert Path(f"{prefix}{e}").read_bytes() == (tmp_path / "one" / f"a{e}").read_bytes()
        assert whole[e] == sha256_file(Path(f"{prefix}{e}"))     # one part: its own digests, hashed once
    empty = _parts(tmp_path / "e", [[], []])
    [(prefix, n, hashes)] = split_merge(empty, tmp_path / "e" / "a", 1024, whole=whole)
    assert n == 0 and list(hashes) == [".idx"] and not Path(f"{prefix}.bin").exists()
    assert whole == {".bin": hashlib.sha256().hexdigest(), ".idx": hashes[".idx"]}
    assert plan_cuts(empty, np.dtype(np.int32), 1024) == [(0, 0)]
    with pytest.raises(FileNotFoundError, match="numbered without a gap"):
        ShardSet.on_disk(tmp_path / "nothing" / "a")


def _entry(out: Path, name: str, docs: list[list[int]], counts: list[int], max_bytes: int | None) -> dict:
    """A manifest source entry over `docs` as one prefix (`max_bytes` None) or as parts."""
    inputs = _parts(out / "tokenized" / name, [docs])
    prefix = out / "tokenized" / name / name
    whole: dict = {}
    written = split_merge(inputs, prefix, max_bytes or 2**40, whole=whole)
    mdir = out / "manifests"
    plan = save_counts(mdir / "plans" / "s" / f"{name}.npy", np.asarray(counts), np.asarray([len(d) for d in docs]))
    rel = lambda p: os.path.relpath(p, mdir)  # noqa: E731
    entry = {"name": name, "prefix": rel(prefix), "effective_tokens": plan["tokens"],
             "files": [{"path": f"{rel(p)}{e}", "sha256": sha256_file(Path(f"{p}{e}"))}
                       for p, _, _ in written for e in (".bin", ".idx")],
             "plan": {"path": f"plans/s/{name}.npy", **plan}}
    if len(written) > 1:
        entry.update(parts=[rel(p) for p, _, _ in written], unsplit_sha256=[whole[".bin"], whole[".idx"]])
    return entry


def _stage(out: Path, sources: list[dict], seq: int, mode: str, packing=None) -> dict:
    mdir = out / "manifests"
    names = ["megatron", "olmo_core"] if mode == "packed" else ["megatron"]
    st = StageInput(out, mdir, "s", seq, sources, packing, VOCAB, out, "fp", mode,
                    partial(stage_sequences, mdir, sources, "fp", seq, packing=packing))
    sections = write_stage(names, st)
    return {"stage": "s", "seq_length": seq, "vocabulary": VOCAB, "sources": sources, "stage_fingerprint": "fp",
            "long_context": None, "samples": sections["megatron"]["train_samples"],
            "blend": blend_of(sections["megatron"]), **sections}


@pytest.mark.parametrize("packing", [None, np.asarray([[0, 3, 0], [0, 2, 0], [1, 0, 1], [0, 6, 1], [0, 1, 1], [0, 0, 2]])])
def test_sequences_and_both_packed_hand_offs_are_the_same_over_parts(tmp_path, packing):
    counts = [2, 1, 0, 1, 3, 1, 1]
    files = {}
    for split in (None, 20):
        out = tmp_path / f"out{split}"
        a, b = _entry(out, "a", DOCS, counts, split), _entry(out, "b", [[20, 21, 22, 0]], [1], split)
        assert ("parts" in a) == (split is not None) and "parts" not in b
        seqs = [(s.tolist(), h) for s, h in stage_sequences(out / "manifests", [a, b], "fp", 12, 127, packing)]
        m = _stage(out, [a, b], 12, "packed", packing)
        held = [*sorted((out / "megatron").rglob("packed*")), *sorted((out / "handoff").rglob("*.npy"))]
        assert len(held) == 4
        files[split] = (seqs, m["megatron"]["draws"], [(f.name, f.read_bytes()) for f in held])
    assert files[None] == files[20]


def test_a_blend_lists_one_prefix_per_part_each_indexing_its_parts_bin(tmp_path):
    out = tmp_path / "out"
    counts = [2, 1, 0, 1, 3, 1, 1]
    a = _entry(out, "a", DOCS, counts, 20)
    b = _entry(out, "b", [[20, 21, 22, 0]], [1], 20)
    m = _stage(out, [a, b], 2, "blend")
    mg = m["megatron"]
    # parts of a: [doc0 x2], [doc1 x1], [doc2 x0], [doc3 x1], [doc4 x3, doc5 x1], [doc6 x1]: a part planned once is
    # itself, one planned otherwise a stage index; one planned not at all, or under one sample, is no prefix
    mine = [p for p in mg["prefixes"] if p["name"] == "a"]
    assert [p["prefix"] for p in mine] == ["../megatron/s/a.part-00000", "../tokenized/a/a.part-00001",
                                           "../tokenized/a/a.part-00003", "../megatron/s/a.part-00004"]
    shards = ShardSet.of_entry(out / "manifests", a)
    offsets = shards.offsets()
    for p in mine:
        k = int(p["prefix"][-5:])
        if not p["files"]:
            assert p["prefix"] == a["parts"][k]
            continue
        hand = out / "manifests" / p["prefix"]
        assert os.path.samefile(f"{hand}.bin", f"{shards.prefixes[k]}.bin") and p["bin_of"] == f"{a['parts'][k]}.bin"
        _, lengths, pointers, _ = read_index(Path(f"{hand}.idx"))
        part_docs = DOCS[offsets[k]:offsets[k + 1]]
        flat = np.fromfile(f"{hand}.bin", dtype=np.int32)
        want = [d for d, c in zip(part_docs, counts[offsets[k]:offsets[k + 1]]) for _ in range(c)]
        assert [flat[q // 4:q // 4 + n].tolist() for q, n in zip(pointers, lengths)] == want
    assert [p["prefix"] for p in mg["prefixes"] if p["name"] == "b"] == [b["prefix"]]   # once: the source itself
    assert mg["draws"][0]["drawn_tokens"] == 2 * sum(p["sequences"] for p in mg["prefixes"] if p["name"] == "a")
    assert check_handoff(m, out / "manifests") == []
    os.unlink(out / "megatron" / "s" / "a.part-00004.idx")
    assert any("a.part-00004.idx is missing" in p for p in check_handoff(m, out / "manifests"))


def test_digests_on_their_thread_are_the_digests_of_the_blocks_in_order():
    """`_Digests` hashes on a thread while a merge reads and writes (at most `ahead` blocks waiting): the same
    digests as hashing the blocks in turn, and an error in the body leaves no thread behind."""
    from curation.shards.merging import _Digests

    rng = np.random.default_rng(3)
    blocks = [rng.integers(0, 256, int(rng.integers(0, 5000)), dtype=np.uint8).tobytes() for _ in range(200)]
    a, b = hashlib.sha256(), hashlib.md5()
    with _Digests([a, b], ahead=2) as digests:
        for block in blocks:
            digests.update(block)
    assert (a.hexdigest(), b.hexdigest()) == (hashlib.sha256(b"".join(blocks)).hexdigest(),
                                              hashlib.md5(b"".join(blocks)).hexdigest())
    with _Digests([]) as nothing:   # nothing to hash: no thread
        nothing.update(b"x")
    assert nothing.pool is None
    with pytest.raises(OSError, match="disk full"), _Digests([hashlib.sha256()]) as digests:
        digests.update(b"y" * 10)
        raise OSError("disk full")
    assert digests.pool._shutdown
