"""`stream_sequences`: the plan's documents in the plan's order laid back to back and cut every `seq_length`
tokens, the last sequence padded, with the tokens each source holds in each: documents longer than several
sequences, empty documents, a source without a plan, a plan drawing some documents more than once."""
from __future__ import annotations

import numpy as np
import pytest

from curation.core.atomic import save_array
from curation.mixture.sequences import _placed, _Shards, plan_order, stream_sequences
from curation.shards import IndexedWriter


def _source(mdir, name: str, lengths, rng, plan, dtype=np.int32) -> tuple[dict, list[np.ndarray]]:
    w = IndexedWriter(mdir / name, dtype)
    docs = [rng.integers(0, 50_000, n).astype(np.int32) for n in lengths]
    for d in docs:
        w.add(d)
    w.close()
    save_array(mdir / f"{name}.plan.npy", np.asarray(plan, np.int32))
    return {"name": name, "prefix": name, "plan": {"path": f"{name}.plan.npy"},
            "effective_tokens": int(sum(n * k for n, k in zip(lengths, plan, strict=True)))}, docs


def _by_hand(sources, docs, fp, seq_length, pad):
    """The plan's documents back to back, cut every `seq_length` tokens, with each token's source."""
    src, doc = plan_order(fp, [np.load(f) for f in sources])
    flat = [docs[s][d] for s, d in zip(src.tolist(), doc.tolist(), strict=True)]
    tokens = np.concatenate(flat) if flat else np.zeros(0, np.int32)
    owner = np.concatenate([np.full(len(docs[s][d]), s) for s, d in zip(src.tolist(), doc.tolist(), strict=True)]) \
        if flat else np.zeros(0, np.int64)
    for at in range(0, tokens.size, seq_length):
        seq = np.full(seq_length, pad, np.int32)
        seq[:min(seq_length, tokens.size - at)] = tokens[at:at + seq_length]
        held = {int(s): int(n) for s, n in zip(*np.unique(owner[at:at + seq_length], return_counts=True), strict=True)}
        yield seq, held


@pytest.mark.parametrize("a_dtype", [np.int32, np.uint16])   # int32 sets are read straight into the sequence
def test_the_sequences_are_the_plans_documents_back_to_back(tmp_path, a_dtype):
    rng = np.random.default_rng(5)
    a_len = [0, 5, 300, 1, 0, 2500, 40, 77, 0, 9]        # empty documents, and one of 20 sequences
    b_len = [128, 129, 3, 1000, 64]
    a, a_docs = _source(tmp_path, "a", a_len, rng, [1, 2, 1, 0, 3, 1, 1, 2, 1, 1], a_dtype)
    b, b_docs = _source(tmp_path, "b", b_len, rng, [2, 1, 0, 1, 4])
    sources = [a, {"name": "unplanned", "effective_tokens": 0}, b]
    got = list(stream_sequences(tmp_path, sources, "fp", 128, 7))
    want = list(_by_hand([tmp_path / "a.plan.npy", tmp_path / "b.plan.npy"], [a_docs, b_docs], "fp", 128, 7))
    assert len(got) == len(want) > 10
    for (seq, held), (wseq, wheld) in zip(got, want, strict=True):
        assert seq.dtype == np.int32 and np.array_equal(seq, wseq)
        assert held == {[0, 2][k]: n for k, n in wheld.items()}   # keys: index into the stage's sources


def test_occurrences_are_gathered_the_same_whatever_the_block(tmp_path):
    rng = np.random.default_rng(9)
    a, _ = _source(tmp_path, "a", rng.integers(0, 50, 40).tolist(), rng, rng.integers(0, 3, 40).tolist())
    b, _ = _source(tmp_path, "b", rng.integers(0, 50, 30).tolist(), rng, rng.integers(0, 3, 30).tolist())
    sources = [a, {"name": "unplanned", "effective_tokens": 0}, b]
    src, doc = plan_order("fp", [np.load(tmp_path / "a.plan.npy"), np.load(tmp_path / "b.plan.npy")])
    shards = _Shards(tmp_path, sources)
    whole = list(_placed(src, doc, [0, 2], shards))
    assert len(whole) == src.size > 40 and {i for i, _, _ in whole} == {0, 2}
    assert list(_placed(src, doc, [0, 2], shards, size=7)) == list(_placed(src, doc, [0, 2], shards, size=1)) == whole
