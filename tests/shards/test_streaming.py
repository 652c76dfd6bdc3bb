"""Shards are counted and merged in bounded blocks: the results equal doing it all at once."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from curation.core.vocab import Vocabulary
from curation.errors import ConservationError
from curation.shards import IndexedWriter, merge, read_index
from curation.shards.counting import count_block, count_tokens_by_modality
from curation.shards.indexed import iter_lengths, iter_tokens, write_index
from tests.conftest import REPO

VOCAB = Vocabulary.load(REPO / "tokenizers" / "curate-demo-v1.yaml")


def _shard(prefix, docs):
    w = IndexedWriter(prefix)
    for d in docs:
        w.add(np.asarray(d, dtype=np.int32))
    w.close()


def _mixed_docs(rng, n):
    """Documents of text ids, image codes between image markers, audio codes between audio markers,
    named and unnamed reserved ids."""
    image, audio, reserved = VOCAB.block("image"), VOCAB.block("audio"), VOCAB.block("reserved")
    marker = VOCAB.marker
    docs = []
    for i in range(n):
        parts = [rng.integers(0, VOCAB.block("text").stop, rng.integers(0, 40))]
        if i % 3 == 0:
            parts += [[marker("image_start")], rng.integers(image.start, image.stop, 30), [marker("end_of_row")],
                      [marker("image_end")]]
        if i % 4 == 0:
            parts += [[marker("audio_start")], rng.integers(audio.start, audio.stop, 17), [marker("audio_end")]]
        if i % 5 == 0:
            parts += [[reserved.stop - 1]]   # a reserved id without a name: a text control token
        docs.append(np.concatenate([np.asarray(p, dtype=np.int64) for p in parts] + [[VOCAB.eod_id]]))
    return docs


@pytest.mark.slow
def test_counting_in_blocks_equals_counting_at_once(tmp_path):
    docs = _mixed_docs(np.random.default_rng(0), 500)
    _shard(tmp_path / "s", docs)
    everything = np.concatenate(docs).astype(np.int32)
    at_once = count_block(everything, VOCAB.blocks, VOCAB.reserved)
    assert at_once["image"] > 0 and at_once["audio"] > 0 and at_once["text"] > 0
    want = at_once | {"documents": len(docs), "total": int(everything.size)}
    assert sum(at_once.values()) == everything.size
    for chunk in (1, 7, 4096, 1 << 22):
        assert count_tokens_by_modality(tmp_path / "s", VOCAB.blocks, VOCAB.reserved, chunk=chunk) == want
    blocks = list(iter_tokens(tmp_path / "s", chunk=7))
    assert max(b.size for b in blocks) == 7 and np.array_equal(np.concatenate(blocks), everything)


def test_counts_by_modality_are_the_ids_classified_one_by_one():
    """`count_block` (edge comparisons, a bincount of the reserved block) against classifying every distinct id:
    its block, and for a reserved id its marker's modality (an unnamed one is a text control token); ids
    outside the vocabulary count nowhere."""
    from curation.shards.counting import _kind

    names = {VOCAB.block("reserved").start + off: name for name, off in VOCAB.reserved.items()}

    def oracle(ids):
        counts = {"text": 0, "image": 0, "audio": 0}
        for i, n in zip(*np.unique(ids, return_counts=True)):
            block = next((b for b in VOCAB.blocks if b.start <= i < b.stop), None)
            if block is not None:
                counts[_kind(names[i]) if int(i) in names else "text" if block.name == "reserved" else block.name] += n
        return counts

    rng = np.random.default_rng(1)
    top, reserved = VOCAB.blocks[-1].stop, VOCAB.block("reserved")
    arrays = [np.concatenate(_mixed_docs(rng, 40)), rng.integers(-3, top + 3, 3000),
              rng.integers(reserved.start, reserved.stop, 500), np.zeros(0, np.int64)]
    for ids in arrays:
        for dtype in (np.int32, np.int64):
            assert count_block(ids.astype(dtype), VOCAB.blocks, VOCAB.reserved) == oracle(ids)


def test_damaged_shards_are_still_refused(tmp_path):
    _shard(tmp_path / "s", [[1, 2, 3], [4, 5]])
    with open(tmp_path / "s.bin", "ab") as f:
        f.write(np.asarray([6], dtype=np.int32).tobytes())
    with pytest.raises(ConservationError, match="holds 6 tokens but its .idx lists 5"):
        count_tokens_by_modality(tmp_path / "s", VOCAB.blocks, VOCAB.reserved)
    _shard(tmp_path / "t", [[1, VOCAB.blocks[-1].stop]])
    with pytest.raises(ConservationError, match="outside the vocabulary"):
        count_tokens_by_modality(tmp_path / "t", VOCAB.blocks, VOCAB.reserved, chunk=1)


def test_streaming_merge_writes_the_bytes_of_a_whole_index(tmp_path):
    rng = np.random.default_rng(1)
    parts, lengths = [], []
    for k, n in enumerate((5, 0, 11, 1, 8)):   # an empty part too
        docs = [rng.integers(0, 1000, rng.integers(1, 9)) for _ in range(n)]
        _shard(tmp_path / f"p{k}", docs)
        parts.append(tmp_path / f"p{k}")
        lengths += [d.size for d in docs]
    write_index(tmp_path / "whole.idx", np.asarray(lengths), np.dtype(np.int32))
    for chunk in (1, 3, 1 << 22):
        merge(parts, tmp_path / f"m{chunk}", chunk=chunk)
        assert (tmp_path / f"m{chunk}.idx").read_bytes() == (tmp_path / "whole.idx").read_bytes()
        assert (tmp_path / f"m{chunk}.bin").read_bytes() == b"".join((p.with_suffix(".bin")).read_bytes()
                                                                     for p in parts)
    assert [int(x) for b in iter_lengths(tmp_path / "m3.idx", 4) for x in b] == lengths
    dtype, lens, pointers, doc_idx = read_index(tmp_path / "m3.idx")
    assert lens.tolist() == lengths and doc_idx.tolist() == list(range(len(lengths) + 1))
    assert pointers.tolist() == (4 * np.concatenate([[0], np.cumsum(lengths)[:-1]])).tolist()


def test_merging_no_parts_writes_an_empty_index_and_no_bin(tmp_path):
    assert merge([], tmp_path / "empty") == 0
    dtype, lens, pointers, doc_idx = read_index(tmp_path / "empty.idx")
    assert dtype == np.int32 and lens.size == 0 and doc_idx.tolist() == [0]
    assert not (tmp_path / "empty.bin").exists()      # megatron-core cannot map a 0-byte file


def test_the_merge_task_counts_and_hashes_the_shards_it_writes(tmp_path):
    """The merge marker carries each merged shard's counts and file digests: those the driver used to compute by
    reading the shards again (`count_tokens_by_modality`, `sha256_file`), for a full and an empty pool."""
    from curation.core.hashing import fingerprint, sha256_file
    from curation.core.layout import part_prefix, source_prefix
    from curation.core.node import Node
    from curation.runtime.merge import run_merge

    rng = np.random.default_rng(2)
    for k, n in enumerate((40, 0, 25)):
        _shard(part_prefix(tmp_path, "s", f"{k:03d}"), _mixed_docs(rng, n))
        _shard(Path(f"{part_prefix(tmp_path, 's', f'{k:03d}')}.long_context"), [])
    layout = {"blocks": [[b.name, b.start, b.size] for b in VOCAB.blocks], "reserved": dict(VOCAB.reserved)}
    node = Node("merge", "s", None, fingerprint("m"), spec={"shards": ["000", "001", "002"],
                                                           "outputs": ["", ".long_context"], "vocab": layout})
    marker = run_merge(tmp_path, node)
    for suffix, exts in (("", (".bin", ".idx")), (".long_context", (".idx",))):
        prefix = Path(f"{source_prefix(tmp_path, 's')}{suffix}")
        got = marker["shards"][suffix]
        assert {k: v for k, v in got.items() if k != "files"} == \
            count_tokens_by_modality(prefix, VOCAB.blocks, VOCAB.reserved)
        assert got["files"] == {ext: {"bytes": Path(f"{prefix}{ext}").stat().st_size,
                                      "sha256": sha256_file(Path(f"{prefix}{ext}"))} for ext in exts}
    assert marker["shards"][""]["documents"] == 65 and marker["shards"][".long_context"]["total"] == 0


def test_the_merge_refuses_ids_outside_the_vocabulary(tmp_path):
    from curation.shards.counting import TokenCounter

    _shard(tmp_path / "p", [[1, VOCAB.blocks[-1].stop]])
    counter = TokenCounter(VOCAB.blocks, VOCAB.reserved, "m.bin")
    with pytest.raises(ConservationError, match="m.bin has ids outside the vocabulary"):
        merge([tmp_path / "p"], tmp_path / "m", tokens=counter.add)
