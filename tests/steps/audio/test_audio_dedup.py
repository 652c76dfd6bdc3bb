"""Audio dedup (curation.steps.audio.fingerprint): exact PCM hash, spectral fingerprints, index, clusters.

Synthetic signals (random note sequences, chirps, noise bursts) are made here; the real-clip tests
run only where ../shared/data/audio exists and are skipped with that reason otherwise.
"""
from __future__ import annotations

import io

import numpy as np
import pytest

from curation.core.graph import key_components
from curation.steps.audio import fingerprint as D
from tests.conftest import SHARED_DATA

SR = 24_000
AUDIO = SHARED_DATA / "audio"
real_clips = pytest.mark.skipif(not AUDIO.is_dir(), reason=f"real clips not available: {AUDIO.resolve()} is missing")


def synth(seed: int, seconds: float = 3.0) -> np.ndarray:
    """Notes with harmonics (50-250 ms, 150-1500 Hz), chirps and noise bursts, under a gentle envelope."""
    rng = np.random.default_rng(seed)
    n = int(seconds * SR)
    out = np.zeros(n, dtype=np.float64)
    pos = 0
    while pos < n:
        length = min(int(rng.uniform(0.05, 0.25) * SR), n - pos)
        t = np.arange(length) / SR
        kind = rng.random()
        if kind < 0.6:
            f0 = rng.uniform(150, 1500)
            seg = sum(rng.uniform(0.2, 1) / h * np.sin(2 * np.pi * f0 * h * t) for h in range(1, 5))
        elif kind < 0.85:
            f0, f1 = rng.uniform(200, 3000, size=2)
            seg = np.sin(2 * np.pi * (f0 * t + (f1 - f0) * t ** 2 / (2 * t[-1] + 1e-9)))
        else:
            seg = rng.standard_normal(length) * 0.5
        fade = np.minimum(1, np.minimum(np.arange(length), np.arange(length)[::-1]) / (0.005 * SR))
        out[pos:pos + length] = seg * fade * rng.uniform(0.3, 1.0)
        pos += length
    return (0.5 * out / np.abs(out).max()).astype(np.float32)


def resample(x: np.ndarray, a: int, b: int) -> np.ndarray:
    import soxr
    return soxr.resample(x, a, b, quality="HQ").astype(np.float32)


def reencode(x: np.ndarray, fmt: str, subtype: str | None = None) -> np.ndarray:
    import soundfile as sf
    buf = io.BytesIO()
    sf.write(buf, x, SR, format=fmt, subtype=subtype)
    buf.seek(0)
    y, _ = sf.read(buf, dtype="float32")
    return y


def matches(a: np.ndarray, b: np.ndarray) -> tuple[bool, float, int]:
    ber, offset, n = D.compare(D.fingerprint(a), D.fingerprint(b))
    return n > 0 and ber <= D.threshold(n), ber, offset


# ------------------------------------------------------------------------------------- exact hash

def test_pcm_hash_equal_for_identical_audio_and_stable():
    x = synth(1)
    h = D.pcm_hash(x)
    assert isinstance(h, bytes) and len(h) == 32
    assert D.pcm_hash(x.copy()) == h
    assert D.pcm_hash(x.astype(np.float64)) == h                      # same samples, other dtype
    assert D.pcm_hash(np.concatenate([np.zeros(500, np.float32), x, np.zeros(9, np.float32)])) == h
    pcm16 = reencode(x, "WAV", "PCM_16")                              # 16-bit PCM, re-wrapped losslessly
    assert D.pcm_hash(reencode(pcm16, "FLAC", "PCM_16")) == D.pcm_hash(pcm16)


def test_pcm_hash_changes_after_resampling_gain_or_codec():
    x = synth(2)
    h = D.pcm_hash(x)
    assert D.pcm_hash(resample(resample(x, SR, 16_000), 16_000, SR)) != h
    assert D.pcm_hash(resample(resample(x, SR, 22_050), 22_050, SR)) != h
    assert D.pcm_hash(x * np.float32(0.5)) != h
    assert D.pcm_hash(reencode(x, "OGG", "VORBIS")) != h
    assert D.pcm_hash(synth(3)) != h
    assert D.pcm_hash(np.zeros(100, np.float32)) == D.pcm_hash(np.zeros(0, np.float32))  # silence: nothing left
    with pytest.raises(ValueError):
        D.pcm_hash(np.zeros((10, 2), np.float32))


def test_exact_duplicates_link_to_smallest_key():
    x, y = synth(4, 1.0), synth(5, 1.0)
    items = [("c", D.pcm_hash(x)), ("a", D.pcm_hash(x)), ("b", D.pcm_hash(y)), ("d", D.pcm_hash(x.copy()))]
    assert D.exact_duplicates(items) == [("a", "c", 0.0), ("a", "d", 0.0)]


# ------------------------------------------------------------------------------------ fingerprint

@pytest.mark.slow
def test_fingerprint_shape_silence_and_determinism():
    x = synth(6, 2.0)
    fp = D.fingerprint(x)
    assert fp.dtype == np.uint32
    assert abs(fp.size - 2.0 * D.FRAMES_PER_SECOND) <= 2
    assert np.array_equal(fp, D.fingerprint(x.copy()))
    assert (fp != D.SILENT).mean() > 0.9
    quiet = np.concatenate([np.zeros(SR, np.float32), x])        # a second of digital silence first
    fq = D.fingerprint(quiet)
    assert (fq[:int(0.9 * D.FRAMES_PER_SECOND)] == D.SILENT).all()
    assert (D.fingerprint(np.zeros(SR, np.float32)) == D.SILENT).all()
    assert D.fingerprint(np.zeros(0, np.float32)).size == 0
    # any input rate: the same audio given at 16 kHz fingerprints like its 24 kHz version
    ber, offset, _ = D.compare(D.fingerprint(resample(x, SR, 16_000), sr=16_000), fp)
    assert ber < 0.05 and offset == 0


@pytest.mark.parametrize("kind", ["gain", "resample", "trim_start", "trim_end", "trim_both", "noise", "ogg"])
def test_copies_match(kind):
    x = synth(7, 4.0)
    rng = np.random.default_rng(0)
    y = {
        "gain": lambda: x * np.float32(10 ** (-6 / 20)),
        "resample": lambda: resample(resample(resample(x, SR, 22_050), 22_050, 16_000), 16_000, SR),
        "trim_start": lambda: x[int(0.3 * SR):],
        "trim_end": lambda: x[:-int(0.5 * SR)],
        "trim_both": lambda: x[int(0.25 * SR):-int(0.35 * SR)],
        "noise": lambda: (x + rng.standard_normal(x.size) * np.sqrt(np.mean(x ** 2) / 1e3)).astype(np.float32),
        "ogg": lambda: reencode(x, "OGG", "VORBIS"),
    }[kind]()
    ok, ber, offset = matches(x, y)
    assert ok, f"{kind}: BER {ber:.3f}"
    if kind == "trim_start":
        assert abs(offset - 0.3 * D.FRAMES_PER_SECOND) <= 1
    if kind in ("gain", "resample"):  # bits flip only where a synthetic note is perfectly stationary
        assert ber < 0.05


def test_distinct_signals_do_not_match():
    prints = [D.fingerprint(synth(s, 3.0)) for s in range(20, 26)]
    for i in range(len(prints)):
        for j in range(i + 1, len(prints)):
            ber, _, n = D.compare(prints[i], prints[j])
            assert ber > 0.4, (i, j, ber)
            assert ber > D.threshold(n)


def test_compare_requires_overlap_of_half_the_longer_clip():
    x = synth(8, 6.0)
    part = x[SR:int(3.5 * SR)]                                    # 2.5 s excerpt of a 6 s clip
    assert D.compare(D.fingerprint(x), D.fingerprint(part)) == (1.0, 0, 0)
    ber, offset, _ = D.compare(D.fingerprint(x), D.fingerprint(x[SR:int(5 * SR)]))  # 4 of 6 s
    assert ber < 0.1 and abs(offset - D.FRAMES_PER_SECOND) <= 1


def test_fft_and_matrix_offsets_agree():
    rng = np.random.default_rng(3)
    a = rng.integers(1, 2 ** 32, 900, dtype=np.uint64).astype(np.uint32)
    b = rng.integers(1, 2 ** 32, 700, dtype=np.uint64).astype(np.uint32)
    a[rng.random(a.size) < 0.2] = D.SILENT
    b[rng.random(b.size) < 0.2] = D.SILENT
    e, n = D._diagonal_sums(a, b)                                 # 630,000 cells: the FFT path
    err = np.bitwise_count(a[:, None] ^ b[None, :]).astype(np.int64)
    valid = (a[:, None] != 0) & (b[None, :] != 0)
    idx = (np.arange(a.size)[:, None] - np.arange(b.size)[None, :] + b.size - 1).ravel()
    assert np.array_equal(e, np.bincount(idx, (err * valid).ravel()).astype(np.int64))
    assert np.array_equal(n, np.bincount(idx, valid.ravel()).astype(np.int64))


def test_threshold_schedule():
    assert D.threshold(10) == D.threshold(D.SHORT_FRAMES) == D.SHORT_BER_THRESHOLD
    assert D.threshold(D.LONG_FRAMES) == D.threshold(10_000) == D.BER_THRESHOLD
    mid = D.threshold((D.SHORT_FRAMES + D.LONG_FRAMES) // 2)
    assert D.SHORT_BER_THRESHOLD < mid < D.BER_THRESHOLD
    assert D.threshold(10, ber_threshold=0.1) == D.threshold(500, ber_threshold=0.1) == 0.1  # strict recipe


# ------------------------------------------------------------------------------ index and clusters

def _collection():
    rng = np.random.default_rng(1)
    items, truth = [], {}
    for s in range(8):
        x = synth(100 + s, float(rng.uniform(1.5, 4.0)))
        copies = {f"src{s}/orig": x, f"src{s}/trim": x[int(0.3 * SR):], f"src{s}/gain": x * np.float32(0.4),
                  f"src{s}/rs": resample(resample(x, SR, 16_000), 16_000, SR)}
        if s >= 6:                                                # two originals without copies
            copies = {f"src{s}/orig": x}
        for k, w in copies.items():
            items.append((k, D.fingerprint(w)))
            truth[k] = s
    return items, truth


@pytest.mark.slow
def test_near_duplicates_index_equals_all_pairs_and_truth():
    items, truth = _collection()
    found = D.near_duplicates(items)
    assert found == D.near_duplicates(items, index=False)
    pairs = {(a, b) for a, b, _ in found}
    want = {(a, b) for a, _ in items for b, _ in items if a < b and truth[a] == truth[b]}
    assert pairs == want
    assert all(a < b and 0 <= ber <= D.BER_THRESHOLD for a, b, ber in found)
    cand = D.candidate_pairs([fp for _, fp in items])
    assert cand.shape[1] == 2 and (cand[:, 0] < cand[:, 1]).all()
    assert len(cand) < len(items) * (len(items) - 1) // 2         # not all pairs


def test_clusters_smallest_key_and_order_independent():
    items, truth = _collection()
    found = D.near_duplicates(items)
    keys = [k for k, _ in items]
    cl = key_components(keys, found)
    for k in keys:  # 'gain' < 'orig' < 'rs' < 'trim'
        assert cl[k] == (f"src{truth[k]}/gain" if truth[k] < 6 else k)
    assert key_components(keys[::-1], found[::-1]) == cl
    assert key_components(["b", "a", "c", "d"], [("c", "d", 0.1), ("b", "c", 0.2)]) == {"a": "a", "b": "b", "c": "b", "d": "b"}
    exact = D.exact_duplicates([("z", b"h"), ("y", b"h")])
    assert key_components(["x", "y", "z"], exact) == {"x": "x", "y": "y", "z": "y"}


# ---------------------------------------------------------------------------------- real clips

@real_clips
@pytest.mark.shared_data
def test_real_clips_copies_match_and_distinct_do_not():
    import soundfile as sf
    names = ["speech_ljspeech/LJ001-0002.flac", "speech_ljspeech/LJ001-0008.flac",   # same reader
             "speech_digits_fsdd/9_nicolas_1.wav", "speech_digits_fsdd/9_nicolas_3.wav",  # same speaker, digit
             "music/librosa_sorohanro_-_solo-trumpet-06.ogg"]
    waves = {n: D.load(AUDIO / n) for n in names}
    prints = {n: D.fingerprint(w) for n, w in waves.items()}
    for i, a in enumerate(names):
        for b in names[i + 1:]:
            ber, _, n = D.compare(prints[a], prints[b])
            assert not (n and ber <= D.threshold(n)), (a, b, ber)
    for n in names:
        x, sr = sf.read(str(AUDIO / n), dtype="float32", always_2d=True)
        x = x.mean(axis=1)
        dur = x.size / sr
        buf = io.BytesIO()
        sf.write(buf, x, sr, format="OGG", subtype="VORBIS")
        buf.seek(0)
        copies = {
            "trim": D.to_canonical(x[int(min(0.3, 0.2 * dur) * sr):x.size - int(min(0.5, 0.2 * dur) * sr)], sr),
            "resample": D.to_canonical(resample(resample(x, sr, 22_050), 22_050, 16_000), 16_000),
            "gain": waves[n] * np.float32(0.5),
            "ogg": D.to_canonical(sf.read(buf, dtype="float32")[0], sr),
        }
        for kind, y in copies.items():
            ber, _, frames = D.compare(prints[n], D.fingerprint(y))
            assert frames and ber <= D.threshold(frames), (n, kind, ber, frames)


@real_clips
@pytest.mark.shared_data
def test_real_clips_exact_hash():
    name = "speech_ljspeech/LJ001-0002.flac"
    a, b = D.load(AUDIO / name), D.load(AUDIO / name)
    assert D.pcm_hash(a) == D.pcm_hash(b)                          # same decoding, same hash
    assert D.pcm_hash(resample(resample(a, SR, 16_000), 16_000, SR)) != D.pcm_hash(a)
    assert D.pcm_hash(D.load(AUDIO / "speech_ljspeech/LJ001-0008.flac")) != D.pcm_hash(a)
