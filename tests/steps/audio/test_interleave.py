"""Interleaved speech-text sequences (curation/steps/audio/interleave.py, Apertus 1.5 2.2.4).

The sequences are checked by parsing their tokens back into segments, independently of the
`layout` the builder reports, and matching each segment to its clip by content.
"""
from __future__ import annotations

import random
import zlib
from collections import Counter

import numpy as np
import pytest

from curation.core.vocab import Vocabulary
from curation.steps.audio.interleave import (
    MAX_LEN,
    Clip,
    audio_tokens,
    build,
    interleave,
    runs,
    transcription,
)
from tests.conftest import VOCAB


@pytest.fixture(scope="module")
def vocab():
    return Vocabulary.load(VOCAB)


def make_clip(vocab, rec: str, order: int, n_codes: int | None = None, start: float | None = None,
              duration: float = 2.0, text: str | None = None) -> Clip:
    rng = np.random.default_rng(zlib.crc32(f"{rec}/{order}".encode()))
    n_codes = int(rng.integers(20, 120)) if n_codes is None else n_codes
    ids = vocab.tokenizer.encode(text or f"Recording {rec}, segment {order}: the speaker goes on.").ids
    return Clip(id=f"{rec}/{order}", recording=rec, order=order,
                start=order * duration if start is None else start, duration=duration,
                codes=rng.integers(0, 4096, size=n_codes), text=np.array(ids, dtype=np.int64))


def make_recording(vocab, rec: str, orders, **kw) -> list[Clip]:
    return [make_clip(vocab, rec, o, **kw) for o in orders]


def parse(seq, vocab, clips: dict[str, Clip]):
    """Tokens -> list of ("audio"|"text", clip id) segments and list of (marker name, index)."""
    toks = seq.tokens
    assert toks.dtype == np.int32
    assert toks[-1] == vocab.eod_id and (toks[:-1] != vocab.eod_id).all()
    audio, text = vocab.block("audio"), vocab.block("text")
    a_start, a_end = vocab.marker("audio_start"), vocab.marker("audio_end")
    markers = {vocab.marker(m): m for m in ("speech_to_text", "text_to_speech", "speech_transcribe")}
    body, items, i = toks[:-1], [], 0
    while i < len(body):
        t = int(body[i])
        if t == a_start:
            j = i + 1 + int(np.argmax(body[i + 1:] == a_end))
            assert body[j] == a_end, "audio segment not closed"
            codes = body[i + 1:j].astype(np.int64)
            assert ((codes >= audio.start) & (codes < audio.stop)).all()
            match = [c.id for c in clips.values() if np.array_equal(c.codes, codes - audio.start)]
            assert len(match) == 1
            items.append(("seg", "audio", match[0]))
            i = j + 1
        elif t in markers:
            items.append(("marker", markers[t], i))
            i += 1
        elif t in text:
            j = i
            while j < len(body) and int(body[j]) in text:
                j += 1
            match = [c.id for c in clips.values() if np.array_equal(c.text, body[i:j])]
            assert len(match) == 1
            items.append(("seg", "text", match[0]))
            i = j
        else:
            raise AssertionError(f"unexpected token {t} at {i}")
    # segments and markers strictly alternate, starting and ending with a segment
    assert [it[0] for it in items] == ["seg", "marker"] * (len(items) // 2) + ["seg"]
    segs = [(it[2], it[1]) for it in items if it[0] == "seg"]
    marks = [(it[1], it[2]) for it in items if it[0] == "marker"]
    return segs, marks


def check_sequence(seq, vocab, clips: dict[str, Clip]):
    """Every per-sequence rule; returns the parsed segments."""
    segs, marks = parse(seq, vocab, clips)
    assert seq.layout == tuple(segs)
    assert seq.clip_ids == tuple(dict.fromkeys(c for c, _ in segs))
    assert segs[-1][1] == "text", "every sequence ends with text"
    # a transcription pair says "transcribe" (its own task); interleaved speech continues into text
    s2t = "speech_transcribe" if seq.kind == "transcription" else "speech_to_text"
    for (prev, nxt), (name, _) in zip(zip(segs, segs[1:]), marks):
        assert prev[1] != nxt[1], "modality alternates"
        assert name == (s2t if prev[1] == "audio" else "text_to_speech")
    assert seq.control_positions.tolist() == [p for _, p in marks]
    assert seq.control_mask.sum() == len(marks)
    assert np.isin(seq.tokens[seq.control_mask],
                   [vocab.marker(s2t), vocab.marker("text_to_speech")]).all()
    assert seq.pool == ("stage2" if len(seq.tokens) <= MAX_LEN else "long_context")
    if seq.kind == "transcription":
        (c1, m1), (c2, m2) = segs
        assert (c1, m1, c2, m2) == (c1, "audio", c1, "text")
    else:
        assert seq.kind == "interleaved"
        orders = [clips[c].order for c, _ in segs]
        assert orders == list(range(orders[0], orders[0] + len(orders))), "clip by clip"
        assert len({clips[c].recording for c, _ in segs}) == 1
    return segs


def check_run(run_clips: list[Clip], seqs, vocab, clips):
    """Coverage of one run: once as audio everywhere, once as text except the leftover."""
    ids = [c.id for c in run_clips]
    counts = Counter()
    in_copies = Counter()
    for s in seqs:
        for seg in check_sequence(s, vocab, clips):
            assert seg[0] in ids
            counts[seg] += 1
            if s.kind == "interleaved":
                in_copies[seg] += 1
    n = len(ids)
    assert all(counts[(i, "audio")] == 1 for i in ids), "every clip exactly once as audio"
    leftover = ids[-1] if n >= 3 else None
    for i in ids:
        assert counts[(i, "text")] == (2 if i == leftover else 1)
    kinds = Counter(s.kind for s in seqs)
    if n <= 2:
        assert kinds == {"transcription": n}
    else:
        assert kinds == {"interleaved": 2, "transcription": 1}
        assert seqs[-1].clip_ids == (leftover,)
        # across the two copies, a clip that is audio in one is text in the other
        for i in ids[:-1]:
            assert in_copies[(i, "audio")] == 1 and in_copies[(i, "text")] == 1
        assert in_copies[(leftover, "text")] == 1 and in_copies[(leftover, "audio")] == 0


@pytest.mark.parametrize("n", range(1, 8))
def test_run_of_n_clips_follows_every_rule(vocab, n):
    clips = make_recording(vocab, "rec", range(10, 10 + n))
    rs = runs(clips)
    assert [[c.id for c in r] for r in rs] == [[c.id for c in clips]]
    seqs = interleave(rs[0], vocab)
    check_run(rs[0], seqs, vocab, {c.id: c for c in clips})


@pytest.mark.parametrize("n", range(3, 8))
def test_copies_start_one_clip_apart(vocab, n):
    clips = make_recording(vocab, "r", range(n))
    a, b, _ = interleave(clips, vocab)
    assert a.layout[0] == ("r/0", "audio") and a.layout[1] == ("r/1", "text")
    assert b.layout[0] == ("r/0", "text") and b.layout[1] == ("r/1", "audio")
    for seq, audio_parity in ((a, 0), (b, 1)):
        assert all((m == "audio") == (int(c.split("/")[1]) % 2 == audio_parity) for c, m in seq.layout)


def test_worked_examples_of_the_docstring(vocab):
    def short(seq):
        return " ".join(("a" if m == "audio" else "t") + c.split("/")[1] for c, m in seq.layout)
    four = interleave(make_recording(vocab, "r", range(4)), vocab)
    assert [short(s) for s in four] == ["a0 t1 a2 t3", "t0 a1 t2", "a3 t3"]
    five = interleave(make_recording(vocab, "r", range(5)), vocab)
    assert [short(s) for s in five] == ["a0 t1 a2 t3", "t0 a1 t2 a3 t4", "a4 t4"]
    assert [s.kind for s in five] == ["interleaved", "interleaved", "transcription"]


def test_recording_with_gaps_in_order_numbers(vocab):
    clips = make_recording(vocab, "g", [0, 1, 2, 4, 5, 6, 7, 9, 11, 12])
    clips += make_recording(vocab, "h", [3, 4, 5, 6, 7])
    by_id = {c.id: c for c in clips}
    rs = runs(clips)
    assert [[c.order for c in r] for r in rs] == [[0, 1, 2], [4, 5, 6, 7], [9], [11, 12], [3, 4, 5, 6, 7]]
    assert [r[0].recording for r in rs] == ["g"] * 4 + ["h"]
    for r in rs:
        check_run(r, interleave(r, vocab), vocab, by_id)
    seqs = build(clips, vocab)
    assert len(seqs) == sum(len(interleave(r, vocab)) for r in rs)
    # no sequence crosses a gap
    run_of = {c.id: k for k, r in enumerate(rs) for c in r}
    assert all(len({run_of[i] for i in s.clip_ids}) == 1 for s in seqs)


def test_time_gap_and_untranscribed_clips_split_runs(vocab):
    clips = [make_clip(vocab, "t", o, start=s, duration=2.0) for o, s in
             [(0, 0.0), (1, 2.5), (2, 4.5), (3, 30.0), (4, 32.0)]]
    assert [[c.order for c in r] for r in runs(clips)] == [[0, 1, 2, 3, 4]]
    assert [[c.order for c in r] for r in runs(clips, max_gap=1.0)] == [[0, 1, 2], [3, 4]]
    assert [[c.order for c in r] for r in runs(clips, max_gap=0.4)] == [[0], [1, 2], [3, 4]]
    silent = make_clip(vocab, "t", 5)
    mute = Clip(silent.id, "t", 5, 10.0, 2.0, silent.codes, np.array([], dtype=np.int64))
    more = make_recording(vocab, "t", [6, 7])
    assert [[c.order for c in r] for r in runs(clips + [mute] + more)] == [[0, 1, 2, 3, 4], [6, 7]]


def test_invalid_input_is_rejected(vocab):
    clips = make_recording(vocab, "x", range(3))
    with pytest.raises(ValueError, match="share order"):
        runs(clips + [Clip("x/1b", "x", 1, 0.0, 1.0, clips[1].codes, clips[1].text)])
    with pytest.raises(ValueError, match="twice"):
        runs(clips + [clips[0]])
    with pytest.raises(ValueError, match="consecutive"):
        interleave([clips[0], clips[2]], vocab)
    with pytest.raises(ValueError, match="consecutive"):
        interleave([clips[0], make_clip(vocab, "y", 1)], vocab)
    with pytest.raises(ValueError, match="empty run"):
        interleave([], vocab)
    bad = Clip("b", "b", 0, 0.0, 1.0, np.array([0, 4096]), clips[0].text)
    with pytest.raises(ValueError, match="0..4095"):
        interleave([bad], vocab)
    eod = Clip("e", "e", 0, 0.0, 1.0, clips[0].codes, np.array([5, vocab.eod_id, 6]))
    with pytest.raises(ValueError, match="end-of-document"):
        interleave([eod], vocab)


def test_audio_tokens_layout(vocab):
    codes = np.array([0, 1, 4095], dtype=np.int16)
    out = audio_tokens(codes, vocab)
    start = vocab.block("audio").start
    assert out.dtype == np.int32
    assert out.tolist() == [vocab.marker("audio_start"), start, start + 1, start + 4095, vocab.marker("audio_end")]


def test_pools_split_at_8192_tokens(vocab):
    # transcription pair: audio_start + codes + audio_end + s2t + text + eod = codes + text + 4
    base = make_clip(vocab, "p", 0)
    t = len(base.text)
    at = Clip("p/at", "p", 0, 0.0, 1.0, np.zeros(MAX_LEN - 4 - t, dtype=np.int64), base.text)
    over = Clip("p/over", "q", 0, 0.0, 1.0, np.zeros(MAX_LEN - 3 - t, dtype=np.int64), base.text)
    s_at, s_over = transcription(at, vocab), transcription(over, vocab)
    assert (len(s_at), s_at.pool) == (8192, "stage2")
    assert (len(s_over), s_over.pool) == (8193, "long_context")
    # a run of 75-second clips (3,000 codes each): each copy holds three audios (> 9,000 tokens)
    clips = make_recording(vocab, "long", range(7), n_codes=3000, duration=75.0)
    seqs = interleave(clips, vocab)
    check_run(clips, seqs, vocab, {c.id: c for c in clips})
    assert [s.pool for s in seqs] == ["long_context", "long_context", "stage2"]
    assert all(len(s) > MAX_LEN for s in seqs[:2])
    # the threshold is a parameter
    assert [s.pool for s in interleave(clips, vocab, max_len=10**6)] == ["stage2"] * 3


def test_deterministic_and_independent_of_input_order(vocab):
    clips = (make_recording(vocab, "a", [0, 1, 2, 3, 5, 6]) + make_recording(vocab, "b", range(7))
             + make_recording(vocab, "c", [4]))
    first = build(clips, vocab)
    shuffled = clips[:]
    random.Random(7).shuffle(shuffled)
    for other in (build(clips, vocab), build(shuffled, vocab)):
        assert len(other) == len(first)
        for x, y in zip(first, other):
            assert np.array_equal(x.tokens, y.tokens)
            assert np.array_equal(x.control_positions, y.control_positions)
            assert (x.kind, x.clip_ids, x.layout, x.pool) == (y.kind, y.clip_ids, y.layout, y.pool)
