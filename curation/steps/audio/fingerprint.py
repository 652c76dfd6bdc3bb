"""Audio deduplication: exact PCM hashes and Haitsma-Kalker style spectral fingerprints.

Everything works on the pipeline's canonical waveform: decoded, mixed down to mono (channel mean),
resampled to 24 kHz with soxr 'HQ', float32 (`load` / `to_canonical` do exactly this).
Figures below: tests/benchmarks/bench_audio_dedup.py -> reports/benchmarks/audio_dedup.md (187 real
clips of ../shared/data/audio, each with 8 planted copies: lossless re-wrap, Ogg Vorbis, MP3,
22.05k->16k->24k resampling, -6 dB, 0.3 s cut at the start, 0.5 s cut at the end, noise at 30 dB SNR).

Exact duplicates - `pcm_hash`, `exact_duplicates`
    SHA-256 over a version tag and the waveform quantised to int16 (round(x * 32768), clipped,
    little-endian), leading and trailing all-zero samples dropped. x * 32768 inverts how 16-bit PCM
    decodes, so a 16-bit source hashes its own samples: a lossless re-wrap (WAV -> FLAC) or padding
    with digital silence hashes the same, any real change (resampling, gain, lossy codec) does not.
    No peak normalisation: it only survives gains that are exact in floating point (any other gain
    moves some samples across a rounding boundary) and it makes every sample depend on one peak
    sample. Measured: the hash matches 187/187 lossless re-wraps and no other planted copy (except
    one end-trim that only cut digital silence); a peak-normalised int16 hash matched 2 of 187 -6 dB
    copies, so it buys next to nothing. The hash is stable for the same decoded audio given the same decoder
    and resampler (libsndfile, soxr version and quality): record those with the hashes.

Near duplicates - `fingerprint`, `compare`, `near_duplicates`
    Fingerprint (Haitsma & Kalker 2002, the ancestor of Chromaprint): the wave is decimated to
    8 kHz, cut into 768-sample (96 ms) Hann frames every 93 samples (11.6 ms, 86 per second), and
    each frame's power spectrum is summed in 33 log-spaced bands from 300 to 3000 Hz (speech
    formants and most musical energy, and below the Nyquist of 8 kHz sources such as FSDD, so every
    copy of a clip sees the whole band). Bit m of sub-fingerprint n is 1 iff
        E(n,m) - E(n,m+1) - (E(n-1,m) - E(n-1,m+1)) > 0,
    the sign of the time change of the spectral slope: invariant to gain (all energies scale
    together), blind to what resampling removes above 3 kHz, robust to codecs (they keep the coarse
    band shape). Frames more than 40 dB below the clip's loudest frame (silence, hiss) carry no
    reliable bits: their sub-fingerprint is 0, reserved for "silent" (a computed 0 is stored as 1),
    and they are ignored by comparisons and the index. Choices measured on the benchmark (lowest
    BER between different recordings over <= 31 frames vs 99th percentile of true pairs): 64 ms
    frames 0.24 vs 0.22 (sub-hop misalignment of trimmed copies hurts), 96 ms 0.21 vs 0.18,
    128 ms 0.17 vs 0.16 (same-speaker FSDD digits converge); log band energies and 100-3800 Hz
    bands did worse.

    Comparison (`compare`): bit error rate (BER) = differing bits / (32 x frames compared) at the
    best alignment offset, over frames non-silent in both. The offset must overlap at least half of
    the longer clip (trimmed copies and codec delay qualify; a 2 s excerpt of a 60 s song is not
    the same recording, and a short clip cannot slide along a long one hunting for a lucky stretch)
    and compare at least 10 frames. Small pairs use the full XOR matrix, large ones per-bit FFT
    cross-correlations (same integers).

    Threshold (`threshold`): BER <= 0.35 (Haitsma-Kalker's value) when 128 or more frames (1.5 s)
    are compared, 0.18 at 32 frames (0.37 s) or fewer, linear in between. Over all 1.4 M pairs of
    the benchmark: different recordings compared over 64+ frames never go below 0.446, true pairs
    reach 0.299 (a whale song, 99.6% of its energy below 300 Hz, plus noise); over 10-31 frames
    (FSDD digits are 0.2-0.9 s) different recordings reach 0.205 - the same speaker saying the same
    digit into the same microphone - while true pairs have p99 0.174. A flat 0.35 would report 7,496
    false pairs (precision 47%); 0.18 reports none, with 99.4% pair recall and every copy clustered
    with its original except a robin call under white noise (94% of its energy above 3 kHz, outside
    the bands; BER 0.44).

    Index (`candidate_pairs`): bit-sampling LSH for Hamming distance, with offset voting. Each of 4
    tables keeps 16 fixed pseudo-random bit positions of every non-silent sub-fingerprint (a run of
    one key in a clip counts once); two frames collide in a table with probability (1 - BER)^16:
    0.07 at BER 0.15, 1.5e-5 for unrelated frames. A collision of frame i of clip a with frame j of
    clip b votes for (a, b) at offset i - j; a pair is a candidate with at least max(2, 0.02 x the
    non-silent frames of the shorter clip) votes at one offset (two adjacent offsets pooled, for
    sub-hop misalignment). Keys with more than 256 postings (hum, tones) are dropped like stop words.
    Only candidates get the BER rule above, so the answer is all-pairs BER's minus what the index
    misses: on the benchmark 0.96% of the pairs are compared, 99.93% of the all-pairs answer is
    found (5 copy-vs-copy pairs of FSDD digits missed, their clusters still whole), 15x faster at
    1,683 clips, and the gap grows with n (all pairs is quadratic; the index follows collisions).

`clusters` joins pairs (near and exact) into connected components; every key maps to the smallest
key of its component, so the result does not depend on input order.
"""
from __future__ import annotations

import hashlib
from collections.abc import Hashable, Iterable, Sequence
from math import gcd
from pathlib import Path

import numpy as np

SR = 24_000                  # canonical sample rate of the pipeline's audio
HASH_TAG = b"curate-audio-pcm16-24k-v1\0"

FP_SR = 8_000                # fingerprint analysis rate
FRAME = 768                  # 96 ms at 8 kHz
HOP = 93                     # 11.6 ms at 8 kHz (Haitsma-Kalker's hop)
N_BANDS = 33                 # 33 bands -> 32 band differences -> 32 bits
FMIN, FMAX = 300.0, 3000.0
SILENCE_DB = 40.0            # frames this far below the clip's loudest frame are "silent"
SILENT = 0                   # reserved sub-fingerprint value for silent frames
FRAMES_PER_SECOND = FP_SR / HOP

BER_THRESHOLD = 0.35         # threshold for long comparisons (>= LONG_FRAMES frames)
SHORT_BER_THRESHOLD = 0.18   # threshold for short comparisons (<= SHORT_FRAMES frames)
SHORT_FRAMES, LONG_FRAMES = 32, 128
MIN_COVERAGE = 0.5           # overlap >= this share of the longer clip
MIN_VALID = 10               # frames compared, at least

TABLES = 4                   # LSH tables
KEY_BITS = 16                # bits sampled per table
MIN_VOTES = 2                # collisions at one offset (2 adjacent pooled) to make a candidate
MIN_VOTE_RATE = 0.02         # ... and at least this many per non-silent frame of the shorter clip
MAX_POSTINGS = 256           # keys with more frames than this are not used

_BLOCK = 4096                # frames per FFT block (bounds memory for long recordings)


# ---------------------------------------------------------------------------------------- decoding

def load(path: str | Path) -> np.ndarray:
    """Decode a file (anything libsndfile reads: wav, flac, ogg, mp3) to the canonical waveform:
    mono (channel mean), 24 kHz (soxr 'HQ'), float32."""
    import soundfile as sf
    x, sr = sf.read(str(path), dtype="float32", always_2d=True)
    return to_canonical(x, sr)


def to_canonical(x: np.ndarray, sr: int) -> np.ndarray:
    """Mono float32 at 24 kHz from samples (frames x channels or 1-D) at rate `sr`."""
    x = np.asarray(x, dtype=np.float32)
    if x.ndim == 2:
        x = x.mean(axis=1, dtype=np.float32)
    if sr != SR:
        import soxr
        x = soxr.resample(x, sr, SR, quality="HQ")
    return np.ascontiguousarray(x, dtype=np.float32)


# ------------------------------------------------------------------------------------- exact hash

def pcm_hash(wave: np.ndarray) -> bytes:
    """SHA-256 (32 bytes) of the canonical waveform quantised to int16, outer digital silence dropped."""
    x = np.asarray(wave)
    if x.ndim != 1:
        raise ValueError("pcm_hash expects a mono (1-D) waveform")
    q = np.clip(np.rint(x.astype(np.float64) * 32768.0), -32768, 32767).astype("<i2")
    nz = np.flatnonzero(q)
    q = q[nz[0]:nz[-1] + 1] if nz.size else q[:0]
    return hashlib.sha256(HASH_TAG + q.tobytes()).digest()


def exact_duplicates(items: Iterable[tuple[Hashable, bytes]]) -> list[tuple[Hashable, Hashable, float]]:
    """(smallest key, other key, 0.0) for every key whose hash an earlier-sorting key also has."""
    first: dict[bytes, Hashable] = {}
    out = []
    for key, h in sorted(items, key=lambda kv: kv[0]):
        if h in first:
            out.append((first[h], key, 0.0))
        else:
            first[h] = key
    return out


# ------------------------------------------------------------------------------------ fingerprint

_BANDS: tuple[int, int, np.ndarray] | None = None


def _band_matrix() -> tuple[int, int, np.ndarray]:
    """(first bin, end bin, (bins, bands) 0/1 matrix summing the FFT bins of each band)."""
    global _BANDS
    if _BANDS is None:
        edges = FMIN * (FMAX / FMIN) ** (np.arange(N_BANDS + 1) / N_BANDS)
        freqs = np.fft.rfftfreq(FRAME, 1.0 / FP_SR)
        m = np.zeros((freqs.size, N_BANDS), dtype=np.float32)
        for b in range(N_BANDS):
            m[(freqs >= edges[b]) & (freqs < edges[b + 1]), b] = 1.0
        used = np.flatnonzero(m.any(axis=1))
        lo, hi = int(used[0]), int(used[-1]) + 1
        _BANDS = (lo, hi, np.ascontiguousarray(m[lo:hi]))
    return _BANDS


_WINDOW = np.hanning(FRAME).astype(np.float32)
_SHIFTS = np.arange(31, -1, -1, dtype=np.uint32)


def band_energies(wave: np.ndarray, sr: int = SR) -> np.ndarray:
    """(frames, 33) band energies of the wave, frames centred every 11.6 ms."""
    import scipy.fft
    from numpy.lib.stride_tricks import sliding_window_view
    from scipy.signal import resample_poly
    x = np.asarray(wave, dtype=np.float32)
    if x.ndim != 1:
        raise ValueError("fingerprint expects a mono (1-D) waveform")
    if sr != FP_SR:
        g = gcd(int(sr), FP_SR)
        x = resample_poly(x, FP_SR // g, int(sr) // g).astype(np.float32)
    if x.size == 0:
        return np.zeros((0, N_BANDS), dtype=np.float32)
    x = np.pad(x, (FRAME // 2, FRAME // 2))
    frames = sliding_window_view(x, FRAME)[::HOP]
    lo, hi, bands = _band_matrix()
    out = np.empty((frames.shape[0], N_BANDS), dtype=np.float32)
    for s in range(0, frames.shape[0], _BLOCK):
        spec = scipy.fft.rfft(frames[s:s + _BLOCK] * _WINDOW, axis=1)[:, lo:hi]
        out[s:s + _BLOCK] = (spec.real ** 2 + spec.imag ** 2) @ bands
    return out


def fingerprint(wave: np.ndarray, sr: int = SR) -> np.ndarray:
    """uint32 sub-fingerprints, one per 11.6 ms (Haitsma-Kalker bits); 0 marks a silent frame."""
    e = band_energies(wave, sr).astype(np.float64)
    if e.shape[0] < 2:
        return np.zeros(0, dtype=np.uint32)
    d = e[:, :-1] - e[:, 1:]                    # spectral slope between neighbouring bands
    bits = (d[1:] - d[:-1]) > 0                 # ... and its change since the previous frame
    fp = np.bitwise_or.reduce(bits.astype(np.uint32) << _SHIFTS, axis=1).astype(np.uint32)
    fp[fp == SILENT] = 1
    total = e.sum(axis=1)
    loud = total > max(total.max() * 10.0 ** (-SILENCE_DB / 10.0), 1e-12)
    fp[~(loud[1:] & loud[:-1])] = SILENT
    return fp


# ------------------------------------------------------------------------------------- comparison

def _diagonal_sums(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(bit errors, frames compared) for every offset o = i - j in -(len(b)-1) .. len(a)-1, counting
    frames non-silent in both clips."""
    la, lb = a.size, b.size
    va, vb = a != SILENT, b != SILENT
    if la * lb <= 1 << 18:  # small: the whole error matrix, summed along its diagonals
        err = np.bitwise_count(a[:, None] ^ b[None, :]).astype(np.int64)
        valid = va[:, None] & vb[None, :]
        idx = (np.arange(la)[:, None] - np.arange(lb)[None, :] + lb - 1).ravel()
        e = np.bincount(idx, (err * valid).ravel(), la + lb - 1)
        n = np.bincount(idx, valid.ravel(), la + lb - 1)
        return np.rint(e).astype(np.int64), np.rint(n).astype(np.int64)
    # large: per-bit cross-correlations by FFT. Silent frames are 0, so for bits x, y of valid
    # frames xor = x + y - 2xy: errors = corr(popcount_a, valid_b) + corr(valid_a, popcount_b)
    # - 2 sum_k corr(bit_k(a), bit_k(b)).
    size = 1 << int(np.ceil(np.log2(la + lb - 1)))
    rf = lambda v: np.fft.rfft(v, size)                       # noqa: E731
    rb = lambda v: np.fft.rfft(v[..., ::-1], size)            # noqa: E731
    fva, fvb = rf(va.astype(np.float64)), rb(vb.astype(np.float64))
    fpa, fpb = rf(np.bitwise_count(a).astype(np.float64)), rb(np.bitwise_count(b).astype(np.float64))
    ba = ((a[None, :] >> _SHIFTS[:, None]) & 1).astype(np.float64)
    bb = ((b[None, :] >> _SHIFTS[:, None]) & 1).astype(np.float64)
    cross = (rf(ba) * rb(bb)).sum(axis=0)
    e = np.fft.irfft(fpa * fvb + fva * fpb - 2.0 * cross, size)[:la + lb - 1]
    n = np.fft.irfft(fva * fvb, size)[:la + lb - 1]
    return np.rint(e).astype(np.int64), np.rint(n).astype(np.int64)


def compare(a: np.ndarray, b: np.ndarray, min_coverage: float = MIN_COVERAGE,
            min_valid: int = MIN_VALID) -> tuple[float, int, int]:
    """(BER, offset, frames compared) at the best alignment: frame i of `a` faces frame i - offset
    of `b`. Offsets must overlap `min_coverage` of the longer clip and compare `min_valid` frames
    non-silent in both; (1.0, 0, 0) when none does."""
    a = np.asarray(a, dtype=np.uint32)
    b = np.asarray(b, dtype=np.uint32)
    la, lb = a.size, b.size
    if la == 0 or lb == 0 or min(la, lb) < min_coverage * max(la, lb):
        return 1.0, 0, 0
    e, n = _diagonal_sums(a, b)
    o = np.arange(la + lb - 1) - (lb - 1)
    overlap = np.minimum(la, o + lb) - np.maximum(0, o)
    ok = (overlap >= min_coverage * max(la, lb)) & (n >= min_valid)
    if not ok.any():
        return 1.0, 0, 0
    rate = np.where(ok, e / np.maximum(n, 1) / 32.0, 2.0)
    k = int(np.argmin(rate))
    return float(rate[k]), int(o[k]), int(n[k])


def threshold(frames: int, ber_threshold: float = BER_THRESHOLD,
              short_ber_threshold: float = SHORT_BER_THRESHOLD) -> float:
    """BER threshold for a comparison over `frames` frames: short up to 32, long from 128, linear between
    (a long threshold below the short one, e.g. a stricter recipe, applies at every length)."""
    short = min(short_ber_threshold, ber_threshold)
    w = min(max((frames - SHORT_FRAMES) / (LONG_FRAMES - SHORT_FRAMES), 0.0), 1.0)
    return short + w * (ber_threshold - short)


# ------------------------------------------------------------------------------------------ index

def _table_masks(tables: int, bits: int) -> list[int]:
    rng = np.random.default_rng(20020101)  # fixed: the same masks in every run and worker
    return [int(sum(1 << int(p) for p in rng.choice(32, size=bits, replace=False))) for _ in range(tables)]


def candidate_pairs(fps: Sequence[np.ndarray], tables: int = TABLES, key_bits: int = KEY_BITS,
                    min_votes: int = MIN_VOTES, min_vote_rate: float = MIN_VOTE_RATE,
                    max_postings: int = MAX_POSTINGS, min_coverage: float = MIN_COVERAGE) -> np.ndarray:
    """(k, 2) array of index pairs i < j, sorted, whose fingerprints collide in the LSH tables at one
    alignment offset (two adjacent offsets pooled) at least max(`min_votes`, `min_vote_rate` x the
    non-silent frames of the shorter clip) times, and whose lengths allow `min_coverage`."""
    n_clips = len(fps)
    fps = [np.asarray(f, dtype=np.uint32) for f in fps]
    keys, clip, frame = [], [], []
    for t, mask in enumerate(_table_masks(tables, key_bits)):
        tag = np.uint64(t) << np.uint64(32)
        for i, fp in enumerate(fps):
            pos = np.flatnonzero(fp != SILENT)
            if pos.size == 0:
                continue
            k = fp[pos] & np.uint32(mask)
            first = np.ones(k.size, dtype=bool)
            first[1:] = (k[1:] != k[:-1]) | (pos[1:] != pos[:-1] + 1)  # a run of one key counts once
            keys.append(k[first].astype(np.uint64) | tag)
            clip.append(np.full(int(first.sum()), i, dtype=np.int64))
            frame.append(pos[first].astype(np.int64))
    empty = np.zeros((0, 2), dtype=np.int64)
    if not keys:
        return empty
    key, clip, frame = np.concatenate(keys), np.concatenate(clip), np.concatenate(frame)
    order = np.lexsort((frame, clip, key))
    key, clip, frame = key[order], clip[order], frame[order]
    starts = np.flatnonzero(np.r_[True, key[1:] != key[:-1]])
    sizes = np.repeat(np.diff(np.r_[starts, key.size]), np.diff(np.r_[starts, key.size]))
    span = max(f.size for f in fps) + 2
    votes = []
    d = 1
    while True:  # every pair of postings of a key: the one d places later, for d = 1, 2, ...
        if d & (d - 1) == 0:  # at powers of two, drop the keys with too few postings left
            keep = (sizes > d) & (sizes <= max_postings)
            key, clip, frame, sizes = key[keep], clip[keep], frame[keep], sizes[keep]
        if key.size <= d:
            break
        same = key[:-d] == key[d:]
        ci, cj = clip[:-d][same], clip[d:][same]
        off = frame[:-d][same] - frame[d:][same]                  # as in compare(): i - j
        other = ci != cj                                          # sorted by clip: ci <= cj
        votes.append((ci[other] * n_clips + cj[other]) * (2 * span) + off[other] + span)
        d += 1
    if not votes:
        return empty
    v = np.sort(np.concatenate(votes))
    # votes per pair and offset bin, for bins {2k, 2k+1} and {2k-1, 2k}: sub-hop misalignment splits
    # one alignment's votes between two adjacent offsets, and one of the two binnings joins them
    pairs, counts = [], []
    for shift in (0, 1):
        b = (v + shift) // 2                                      # still sorted; bins never straddle pairs
        edge = np.flatnonzero(np.r_[True, b[1:] != b[:-1], True])
        c = np.diff(edge)
        ok = c >= min_votes
        pairs.append(b[edge[:-1]][ok] // span)
        counts.append(c[ok])
    pair, count = np.concatenate(pairs), np.concatenate(counts)
    if pair.size == 0:
        return empty
    uniq, inv = np.unique(pair, return_inverse=True)
    best = np.zeros(uniq.size, dtype=np.int64)
    np.maximum.at(best, inv, count)
    out = np.stack([uniq // n_clips, uniq % n_clips], axis=1)
    lengths = np.array([f.size for f in fps], dtype=np.int64)
    valid = np.array([int((f != SILENT).sum()) for f in fps], dtype=np.int64)
    la, lb = lengths[out[:, 0]], lengths[out[:, 1]]
    enough = best >= np.maximum(min_votes, np.ceil(min_vote_rate * np.minimum(valid[out[:, 0]], valid[out[:, 1]])))
    return out[enough & (np.minimum(la, lb) >= min_coverage * np.maximum(la, lb))]


def near_duplicates(items: Sequence[tuple[Hashable, np.ndarray]], ber_threshold: float = BER_THRESHOLD,
                    short_ber_threshold: float = SHORT_BER_THRESHOLD, *, index: bool = True,
                    **index_options) -> list[tuple[Hashable, Hashable, float]]:
    """(key_a, key_b, BER) with key_a < key_b for the pairs whose fingerprints match: BER at the best
    offset within `threshold(frames compared)`. `index=False` compares all pairs (reference)."""
    keys = [k for k, _ in items]
    fps = [np.asarray(f, dtype=np.uint32) for _, f in items]
    if index:
        pairs = candidate_pairs(fps, **index_options).tolist()
    else:
        pairs = [(i, j) for i in range(len(fps)) for j in range(i + 1, len(fps))]
    out = []
    for i, j in pairs:
        ber, _, n = compare(fps[i], fps[j])
        if n and ber <= threshold(n, ber_threshold, short_ber_threshold):
            a, b = sorted((keys[i], keys[j]))
            out.append((a, b, ber))
    return sorted(out, key=lambda r: (r[0], r[1]))
