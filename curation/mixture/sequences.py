"""A stage's plan as training sequences of `seq_length` tokens: the one order both trainers read.

Format-agnostic: this module says *which tokens, in which order*; a hand-off writer
(`curation.mixture.megatron_packed` for Megatron-LM) only says how they are laid out on disk, so a second
trainer format is one more writer over the same sequences.

- An ordinary stage: every planned (source, document) occurrence (a document planned 3 times occurs 3
  times) in one order, shuffled with a seed from the stage fingerprint (`plan_order`; `curate train`
  reads the same order), the documents back to back, cut into sequences of `seq_length` tokens (a
  document may continue in the next sequence), the last one padded.
- A long-context stage: the best-fit-decreasing bins of its packing (`curation.mixture.longcontext`),
  each bin's documents back to back, then padding: a document is never split.

Each sequence comes with the tokens it holds per source (index into the stage's sources), so what a
trainer draws can be counted per source.
"""
from __future__ import annotations

import hashlib
from collections.abc import Iterator
from pathlib import Path

import numpy as np

from curation.mixture.sampling import read_plan
from curation.shards.shardset import ShardSet

_IDS = np.dtype(np.int32)   # a sequence's ids


def plan_order(stage_fingerprint: str, counts: list[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """(position in `counts`, document index) of every planned occurrence, in the stage's seeded order.

    int32 where the documents fit (the driver holds both arrays for a stage: 16 bytes per occurrence with the
    permutation, instead of 40 with int64 and their unshuffled copies)."""
    totals = [int(np.asarray(c, dtype=np.int64).sum()) for c in counts]
    n = sum(totals)
    if not n:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    seed = int.from_bytes(hashlib.sha256(f"order:{stage_fingerprint}".encode()).digest()[:8], "little")
    order = np.random.default_rng(seed).permutation(n)
    doc_type = np.int32 if max(c.size for c in counts) < 2**31 else np.int64
    src = np.concatenate([np.full(t, i, dtype=np.int32) for i, t in enumerate(totals)])[order]
    doc = np.concatenate([np.repeat(np.arange(c.size, dtype=doc_type), np.asarray(c, dtype=np.int64))
                          for c in counts])[order]
    return src, doc


def _blocks(*arrays: np.ndarray, size: int = 1 << 16) -> Iterator[tuple]:
    """The arrays' rows as Python ints, `size` at a time: never a Python list of the whole plan."""
    for at in range(0, len(arrays[0]), size):
        yield from zip(*(a[at:at + size].tolist() for a in arrays))


class _Shards:
    """Tokens, per-document starts and lengths of the stage's sources (each a `ShardSet`: one prefix or its
    parts), opened on first use. Tokens are read with `pread`, never memory-mapped: the stage reads its
    documents in plan order, scattered over each shard, and every page a mapping touches (with the kernel's
    fault-around, 64 KB per document) would stay in this process's RSS, growing it by the size of every shard
    the stage draws from; a read leaves nothing behind."""

    def __init__(self, mdir: Path, sources: list[dict]):
        self.mdir, self.sources, self._open = mdir, sources, {}

    def __call__(self, i: int):
        """(read(start, n) -> n tokens from token `start`, lengths, starts) of source index `i`."""
        if i not in self._open:
            shards = ShardSet.of_entry(self.mdir, self.sources[i])
            self._open[i] = (shards.reader(), shards.lengths(), shards.starts())
        return self._open[i]


def planned(sources: list[dict]) -> list[int]:
    """Indices of the sources a stage draws from (a plan with tokens)."""
    return [i for i, s in enumerate(sources) if "plan" in s and s["effective_tokens"] > 0]


def stream_sequences(mdir: Path, sources: list[dict], stage_fingerprint: str, seq_length: int,
                     pad: int) -> Iterator[tuple[np.ndarray, dict[int, int]]]:
    """The ordinary stage's sequences: (tokens of `seq_length`, planned tokens per source index in it)."""
    which, order_src, order_doc = _stage_order(mdir, sources, stage_fingerprint)
    shards = _Shards(mdir, sources)
    return _stream(shards, _placed(order_src, order_doc, which, shards), seq_length, pad)


def _stage_order(mdir: Path, sources: list[dict], stage_fingerprint: str) -> tuple[list[int], np.ndarray, np.ndarray]:
    """The planned sources' indices and the plan's occurrences in order (`plan_order`, positions into them)."""
    which = planned(sources)
    return (which, *plan_order(stage_fingerprint, [read_plan(mdir / sources[i]["plan"]["path"]) for i in which]))


def _stream(shards: _Shards, placed: Iterator[tuple[int, int, int]], seq_length: int,
            pad: int) -> Iterator[tuple[np.ndarray, dict[int, int]]]:
    """The documents `placed` gives (source index, first token, tokens) back to back, cut into sequences of
    `seq_length`, the last one padded."""
    blank = np.full(seq_length, pad, dtype=np.int32).tobytes()
    buf = bytearray(blank)
    seq, view, at, held = np.frombuffer(buf, np.int32), memoryview(buf), 0, {}
    for i, start, n in placed:
        tokens = shards(i)[0]
        direct = tokens.dtype == _IDS   # a set of int32 ids is read straight into the sequence
        while n:
            take = min(n, seq_length - at)
            if direct:
                tokens.read_into(start, view[at * 4:(at + take) * 4])
            else:
                seq[at:at + take] = tokens(start, take)
            held[i] = held.get(i, 0) + take
            at, start, n = at + take, start + take, n - take
            if at == seq_length:
                yield seq, held
                buf = bytearray(blank)
                seq, view, at, held = np.frombuffer(buf, np.int32), memoryview(buf), 0, {}
    if at:
        yield seq, held


def _placed(order_src: np.ndarray, order_doc: np.ndarray, which: list[int], shards: _Shards,
            size: int = 1 << 16) -> Iterator[tuple[int, int, int]]:
    """(source index, first token, tokens) of every planned occurrence in plan order, gathered `size` at a time
    with numpy (no indexing of a numpy array per document)."""
    for at in range(0, len(order_src), size):
        src, doc = order_src[at:at + size], order_doc[at:at + size]
        starts, lengths = _located(src, doc, which, shards)
        yield from zip([which[k] for k in src.tolist()], starts.tolist(), lengths.tolist())


def _located(src: np.ndarray, doc: np.ndarray, which: list[int], shards: _Shards) -> tuple[np.ndarray, np.ndarray]:
    """(first token, tokens) of each occurrence (position in `which`, document), with numpy per source."""
    starts, lengths = np.empty(src.size, np.int64), np.empty(src.size, np.int64)
    for k in np.unique(src).tolist():
        _, all_lengths, all_starts = shards(which[k])
        mine = src == k
        starts[mine], lengths[mine] = all_starts[doc[mine]], all_lengths[doc[mine]]
    return starts, lengths


def bin_sequences(mdir: Path, sources: list[dict], packing: np.ndarray, seq_length: int,
                  pad: int) -> Iterator[tuple[np.ndarray, dict[int, int]]]:
    """The long-context stage's sequences: each packed bin's documents in packing order, then `pad`."""
    rows = _by_bin(packing)
    return _bins(_Shards(mdir, sources), sources, rows, seq_length, pad, 0, int(rows[:, 2].max()) + 1 if len(rows) else 0)


def _by_bin(packing: np.ndarray) -> np.ndarray:
    return packing[np.lexsort((np.arange(len(packing)), packing[:, 2]))] if packing.size else packing


def _bins(shards: _Shards, sources: list[dict], rows: np.ndarray, seq_length: int, pad: int, first: int,
          count: int) -> Iterator[tuple[np.ndarray, dict[int, int]]]:
    """The sequences of bins `first` .. `first + count - 1`, from packing `rows` sorted by bin."""
    bounds = np.searchsorted(rows[:, 2], np.arange(first, first + count + 1)) if len(rows) else np.zeros(count + 1, int)
    for b in range(count):
        seq = np.full(seq_length, pad, dtype=np.int32)
        at, held = 0, {}
        for src, doc, _ in rows[bounds[b]:bounds[b + 1]]:
            tokens, lengths, starts = shards(int(src))
            n = int(lengths[doc])
            if at + n > seq_length:
                raise ValueError(f"packed sequence {first + b} overflows {seq_length} tokens: the packing does not "
                                 f"match the shards of {sources[int(src)]['name']}; re-run `curate run`")
            seq[at:at + n] = tokens(int(starts[doc]), n)
            held[int(src)] = held.get(int(src), 0) + n
            at += n
        yield seq, held


def chunk_plans(mdir: Path, sources: list[dict], stage_fingerprint: str, seq_length: int,
                packing: np.ndarray | None, sizes: list[int]) -> list[dict]:
    """What each packed prefix's task reads to make its `sizes[j]` sequences and the first token of the next
    (`chunk_sequences`): the slice of the plan's occurrences from the one holding its first token (`skip`
    tokens into it) to the one holding the next prefix's first token; or, for a long-context stage, the
    packing rows of its bins and of the next bin. Computed with numpy over the plan (no loop per document)."""
    ends = np.cumsum(sizes)
    starts = ends - np.asarray(sizes)
    if packing is not None:
        rows = _by_bin(packing)
        lo, hi = np.searchsorted(rows[:, 2], starts), np.searchsorted(rows[:, 2], ends + 1)
        return [{"rows": rows[a:b], "first": int(first), "bins": int(min(end + 1, ends[-1]) - first)}
                for a, b, first, end in zip(lo.tolist(), hi.tolist(), starts.tolist(), ends.tolist())]
    which, order_src, order_doc = _stage_order(mdir, sources, stage_fingerprint)
    done = np.cumsum(_located(order_src, order_doc, which, _Shards(mdir, sources))[1])   # tokens to each end
    plans = []
    for a, b in zip((starts * seq_length).tolist(), (ends * seq_length).tolist()):
        first = int(np.searchsorted(done, a, side="right"))            # the occurrence holding token a
        last = int(np.searchsorted(done, b, side="right")) + 1         # and the one holding token b
        plans.append({"src": order_src[first:last], "doc": order_doc[first:last], "which": which,
                      "skip": int(a - (done[first - 1] if first else 0))})
    return plans


def chunk_sequences(mdir: Path, sources: list[dict], seq_length: int, pad: int,
                    plan: dict) -> Iterator[tuple[np.ndarray, dict[int, int]]]:
    """The sequences of one packed prefix's `chunk_plans` entry, then those after it that its slice reaches."""
    shards = _Shards(mdir, sources)
    if "rows" in plan:
        return _bins(shards, sources, plan["rows"], seq_length, pad, plan["first"], plan["bins"])
    placed = _placed(plan["src"], plan["doc"], plan["which"], shards)

    def skipped():
        for n, (i, start, length) in enumerate(placed):
            yield (i, start + plan["skip"], length - plan["skip"]) if n == 0 else (i, start, length)
    return _stream(shards, skipped(), seq_length, pad)


def stage_sequences(mdir: Path, sources: list[dict], stage_fingerprint: str, seq_length: int, pad: int,
                    packing: np.ndarray | None) -> Iterator[tuple[np.ndarray, dict[int, int]]]:
    """The stage's sequences, whichever kind of stage it is."""
    if packing is not None:
        return bin_sequences(mdir, sources, packing, seq_length, pad)
    return stream_sequences(mdir, sources, stage_fingerprint, seq_length, pad)
