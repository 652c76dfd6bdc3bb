"""Audio dedup on real clips: planted copies of 8 kinds, precision / recall, throughput, index vs all pairs.

Every clip of ../shared/data/audio (manifest.csv: LJSpeech, LibriSpeech, misc speech, FSDD digits,
music, other sounds; SOURCES.md section 5) is decoded at its own rate, and copies are planted as
another source would hold them: a lossless re-wrap, Ogg Vorbis and MP3 re-encodes (libsndfile),
a 22.05 kHz -> 16 kHz -> 24 kHz resampling chain, -6 dB gain, 0.3 s cut from the start, 0.5 s cut
from the end (at most 20% of a short clip), and white noise at 30 dB SNR. All originals and copies
go through `curation.steps.audio.fingerprint` together; the truth is "same original file".

Usage: .venv/bin/python tests/benchmarks/bench_audio_dedup.py [--no-all-pairs]
       → reports/benchmarks/audio_dedup.md
"""
from __future__ import annotations

import argparse
import csv
import io
import itertools
import os
import platform
import sys
import time
from collections import Counter, defaultdict
from pathlib import Path

import numpy as np

from curation.core.graph import key_components

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))
AUDIO = REPO.parent / "shared" / "data" / "audio"

KINDS = ["lossless", "ogg", "mp3", "resample", "gain-6dB", "trim_start", "trim_end", "noise30"]
KIND_TEXT = {
    "lossless": "lossless re-wrap (FLAC of the same PCM; float WAV for Vorbis sources)",
    "ogg": "re-encoded to Ogg Vorbis (libsndfile default quality)",
    "mp3": "re-encoded to MP3 (libsndfile/LAME default)",
    "resample": "resampled native → 22.05 kHz → 16 kHz → 24 kHz (soxr)",
    "gain-6dB": "gain −6 dB",
    "trim_start": "0.3 s cut from the start (20% for clips under 1.5 s)",
    "trim_end": "0.5 s cut from the end (20% for clips under 2.5 s)",
    "noise30": "white noise added at 30 dB SNR",
}


def group_of(path: str) -> str:
    return path.split("/")[0]


def peak_norm_hash(wave: np.ndarray) -> bytes:
    """The rejected alternative for `pcm_hash`: int16 of the wave peak-normalised to -3 dBFS."""
    import hashlib
    peak = float(np.abs(wave).max()) if wave.size else 0.0
    x = wave if peak == 0 else (wave * (10 ** (-3 / 20) / peak)).astype(np.float32)
    return hashlib.blake2b(np.round(x * 32767).astype("<i2").tobytes(), digest_size=16).digest()


def plant(native: np.ndarray, sr: int, subtype: str, kind: str, rng: np.random.Generator) -> tuple[np.ndarray, int]:
    """A copy of the native-rate clip (frames x channels): (mono samples, rate) as the copy's holder
    would decode them. Only the lossless re-wrap keeps the channels; the others start from the mono mix."""
    import soundfile as sf
    import soxr

    x = native.mean(axis=1, dtype=np.float32)

    def roundtrip(fmt: str, sub: str | None, data: np.ndarray = x) -> tuple[np.ndarray, int]:
        buf = io.BytesIO()
        sf.write(buf, data, sr, format=fmt, subtype=sub)
        buf.seek(0)
        y, s = sf.read(buf, dtype="float32", always_2d=True)
        return y.mean(axis=1, dtype=np.float32), s

    dur = len(x) / sr
    if kind == "lossless":
        return roundtrip("FLAC", subtype, native) if subtype in ("PCM_16", "PCM_24") else roundtrip("WAV", "FLOAT", native)
    if kind == "ogg":
        return roundtrip("OGG", "VORBIS")
    if kind == "mp3":
        return roundtrip("MP3", "MPEG_LAYER_III")
    if kind == "resample":
        y = soxr.resample(soxr.resample(x, sr, 22050, quality="HQ"), 22050, 16000, quality="HQ")
        return y.astype(np.float32), 16000
    if kind == "gain-6dB":
        return (x * np.float32(10 ** (-6 / 20))).astype(np.float32), sr
    if kind == "trim_start":
        return x[int(round(min(0.3, 0.2 * dur) * sr)):], sr
    if kind == "trim_end":
        return x[:len(x) - int(round(min(0.5, 0.2 * dur) * sr))], sr
    if kind == "noise30":
        power = float(np.mean(x.astype(np.float64) ** 2))
        noise = rng.standard_normal(len(x)) * np.sqrt(power / 10 ** (30 / 10))
        return (x + noise).astype(np.float32), sr
    raise ValueError(kind)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--no-all-pairs", action="store_true", help="skip the all-pairs BER reference")
    ap.add_argument("--out", default=str(REPO / "reports" / "benchmarks" / "audio_dedup.md"))
    args = ap.parse_args()
    import soundfile as sf

    from curation.steps.audio import fingerprint as D

    load_avg = os.getloadavg()[0]
    rows = list(csv.DictReader(open(AUDIO / "manifest.csv", encoding="utf-8")))
    meta = {r["file"]: r for r in rows}
    rng = np.random.default_rng(0)
    keys, waves, truth, kind_of = [], [], {}, {}
    t0 = time.perf_counter()
    for r in rows:
        info = sf.info(str(AUDIO / r["file"]))
        x, sr = sf.read(str(AUDIO / r["file"]), dtype="float32", always_2d=True)
        keys.append(r["file"])
        waves.append(D.to_canonical(x, sr))
        truth[r["file"]], kind_of[r["file"]] = r["file"], "original"
        for kind in KINDS:
            y, s = plant(x, sr, info.subtype, kind, rng)
            key = f"copies/{kind}/{r['file']}"
            keys.append(key)
            waves.append(D.to_canonical(y, s))
            truth[key], kind_of[key] = r["file"], kind
    t_plant = time.perf_counter() - t0
    seconds = sum(w.size for w in waves) / D.SR
    orig_seconds = sum(w.size for k, w in zip(keys, waves) if kind_of[k] == "original") / D.SR

    # throughput: best of 3 passes (one process, one thread of numpy's)
    t_fp = t_hash = t_load = float("inf")
    for _ in range(3):
        t0 = time.perf_counter()
        fps = [D.fingerprint(w) for w in waves]
        t_fp = min(t_fp, time.perf_counter() - t0)
        t0 = time.perf_counter()
        hashes = [D.pcm_hash(w) for w in waves]
        t_hash = min(t_hash, time.perf_counter() - t0)
        t0 = time.perf_counter()
        for r in rows:
            D.load(AUDIO / r["file"])
        t_load = min(t_load, time.perf_counter() - t0)
    peak = [peak_norm_hash(w) for w in waves]

    # exact hash recall per kind
    by_key = dict(zip(keys, range(len(keys))))
    exact = {}
    for kind in KINDS:
        ks = [k for k in keys if kind_of[k] == kind]
        same = sum(hashes[by_key[k]] == hashes[by_key[truth[k]]] for k in ks)
        same_peak = sum(peak[by_key[k]] == peak[by_key[truth[k]]] for k in ks) if peak else None
        exact[kind] = (same, same_peak, len(ks))
    exact_fp = sum(1 for (a, b, _) in D.exact_duplicates(zip(keys, hashes)) if truth[a] != truth[b])

    # near duplicates: index + verification
    items = list(zip(keys, fps))
    t0 = time.perf_counter()
    cand = D.candidate_pairs(fps)
    t_cand = time.perf_counter() - t0
    t0 = time.perf_counter()
    found = D.near_duplicates(items)
    t_near = time.perf_counter() - t0
    n_items = len(items)
    total_pairs = n_items * (n_items - 1) // 2
    lengths = np.array([f.size for f in fps])
    compatible = int(sum(((np.minimum(lengths[i], lengths[i + 1:]) >= D.MIN_COVERAGE * np.maximum(lengths[i], lengths[i + 1:]))
                          & (lengths[i] > 0) & (lengths[i + 1:] > 0)).sum() for i in range(n_items)))
    brute = None
    if not args.no_all_pairs:
        t0 = time.perf_counter()
        brute = D.near_duplicates(items, index=False)
        t_brute = time.perf_counter() - t0

    # all BERs of the true pairs (for the per-kind tables) and of the hard negatives
    pos = defaultdict(list)  # kind -> (BER, frames, key)
    for k in keys:
        if kind_of[k] != "original":
            b, _, n = D.compare(fps[by_key[truth[k]]], fps[by_key[k]])
            pos[kind_of[k]].append((b, n, k))
    originals = [k for k in keys if kind_of[k] == "original"]
    hard = defaultdict(list)  # label -> (BER, frames, a, b)
    for a, b in itertools.combinations(originals, 2):
        ma, mb = meta[a], meta[b]
        if ma["speaker"] and ma["speaker"] == mb["speaker"]:
            g = group_of(a)
            label = f"{g}, same speaker" + (", same digit" if g == "speech_digits_fsdd" and ma["transcript"] == mb["transcript"] else "")
        elif group_of(a) == group_of(b):
            label = f"{group_of(a)}, different speakers / recordings"
        else:
            label = "different groups"
        ber, _, n = D.compare(fps[by_key[a]], fps[by_key[b]])
        hard[label].append((ber, n, a, b))

    # scoring
    found_set = {(a, b) for a, b, _ in found}
    true_pairs = {tuple(sorted(p)) for grp in _groups(keys, truth).values() for p in itertools.combinations(grp, 2)}
    tp = found_set & true_pairs
    fp_pairs = sorted(((a, b, ber) for a, b, ber in found if truth[a] != truth[b]), key=lambda r: r[2])
    cl = key_components(keys, found)
    kind_rows = []
    for kind in KINDS:
        ks = [k for k in keys if kind_of[k] == kind]
        direct = sum(tuple(sorted((k, truth[k]))) in found_set for k in ks)
        clustered = sum(cl[k] == cl[truth[k]] for k in ks)
        involved = [(a, b) for a, b in found_set if kind_of[a] == kind or kind_of[b] == kind]
        prec = sum(truth[a] == truth[b] for a, b in involved) / max(len(involved), 1)
        bers = np.array([b for b, _, _ in pos[kind]])
        worst = max(pos[kind])
        kind_rows.append(
            f"| {kind} | {len(ks)} | {direct / len(ks):.1%} | {clustered / len(ks):.1%} | {prec:.1%} | "
            f"{np.median(bers):.3f} | {np.percentile(bers, 95):.3f} | {worst[0]:.3f} ({_short(truth[worst[2]])}) | "
            f"{exact[kind][0]} | {exact[kind][1]} |")
    # per source group
    group_rows = []
    for g in sorted({group_of(k) for k in originals}, key=lambda s: [r["file"] for r in rows].index(next(k for k in originals if group_of(k) == s))):
        ks = [k for k in keys if group_of(truth[k]) == g and kind_of[k] != "original"]
        direct = sum(tuple(sorted((k, truth[k]))) in found_set for k in ks)
        clustered = sum(cl[k] == cl[truth[k]] for k in ks)
        fps_g = sum(1 for a, b, _ in fp_pairs if group_of(truth[a]) == g or group_of(truth[b]) == g)
        group_rows.append(f"| {g} | {sum(1 for k in originals if group_of(k) == g)} | {len(ks)} | "
                          f"{direct / len(ks):.1%} | {clustered / len(ks):.1%} | {fps_g} |")
    n_groups = len(originals)
    whole = sum(len({cl[k] for k in grp}) == 1 for grp in _groups(keys, truth).values())
    mixed = sum(len({truth[k] for k in ms}) > 1 for ms in _members(cl).values())
    missed = sorted(((b, n, k) for kind in KINDS for b, n, k in pos[kind]
                     if tuple(sorted((k, truth[k]))) not in found_set), reverse=True)

    hard_rows = []
    for label in sorted(hard, key=lambda s: (s == "different groups", s)):
        v = hard[label]
        bers = np.array([b for b, n, _, _ in v if n])
        lo = min(v)
        hard_rows.append(f"| {label} | {len(v)} | {bers.min():.3f} ({_short(lo[2])} vs {_short(lo[3])}, {lo[1]} frames) | "
                         f"{np.percentile(bers, 1):.3f} | {np.median(bers):.3f} | "
                         f"{sum(D.threshold(n) >= b for b, n, _, _ in v if n)} |")

    lines = [
        "# Audio dedup: exact PCM hash and spectral fingerprints on planted copies", "",
        f"Produced by `.venv/bin/python tests/benchmarks/bench_audio_dedup.py` on {time.strftime('%Y-%m-%d')}, "
        f"{platform.machine()}, {os.cpu_count()} CPUs, Python {platform.python_version()}, numpy {np.__version__}, "
        f"libsndfile {sf.__libsndfile_version__}; load average {load_avg:.1f} at the start (shared machine: "
        "timings are upper bounds).", "",
        f"{len(originals)} real clips of `../shared/data/audio` ({orig_seconds / 60:.1f} min: "
        + ", ".join(f"{g} {c}" for g, c in Counter(group_of(k) for k in originals).items())
        + f"), and {len(keys) - len(originals)} planted copies, {len(KINDS)} per clip, treated as clips of other "
        f"sources: {n_items} items, {seconds / 60:.1f} min of audio at 24 kHz mono, "
        f"{len(true_pairs):,} true pairs (any two items from the same original) among {total_pairs:,}. "
        f"Planting took {t_plant:.1f} s.", "",
        f"Method (`curation/steps/audio/fingerprint.py`): Haitsma-Kalker sub-fingerprints ({D.N_BANDS} bands "
        f"{D.FMIN:.0f}-{D.FMAX:.0f} Hz of {1000 * D.FRAME / D.FP_SR:.0f} ms frames every {1000 * D.HOP / D.FP_SR:.1f} ms "
        "at 8 kHz; 32 bits = signs of the time change of band-energy differences; silent frames marked and "
        f"ignored), bit error rate (BER) at the best offset overlapping ≥ {D.MIN_COVERAGE:.0%} of the longer clip, "
        f"threshold {D.SHORT_BER_THRESHOLD} over ≤ {D.SHORT_FRAMES} frames compared "
        f"({D.SHORT_FRAMES / D.FRAMES_PER_SECOND:.2f} s) rising linearly to {D.BER_THRESHOLD} over ≥ {D.LONG_FRAMES} "
        f"frames ({D.LONG_FRAMES / D.FRAMES_PER_SECOND:.2f} s); candidates from {D.TABLES} bit-sampling LSH tables of "
        f"{D.KEY_BITS} bits with ≥ max({D.MIN_VOTES}, {D.MIN_VOTE_RATE} × non-silent frames of the shorter clip) "
        "collisions at one alignment offset (two adjacent offsets pooled), verified by the same BER rule.", "",
        "## Per kind of copy", "",
        "Recall *pair*: the copy and its original are reported as a pair; *cluster*: they end in the same cluster "
        "(also through other copies). Precision: reported pairs involving a copy of this kind that are true. BER: "
        "original vs copy at the best offset. Exact: copies whose `pcm_hash` equals the original's; *peak-norm.*: "
        "the same with int16 of the wave peak-normalised to −3 dBFS (the alternative rejected for `pcm_hash`).", "",
        "| kind | copies | recall pair | recall cluster | precision | BER median | BER p95 | BER max (clip) | exact hash | exact, peak-norm. |",
        "|---|---|---|---|---|---|---|---|---|---|", *kind_rows, "",
        *[f"- {k}: {v}" for k, v in KIND_TEXT.items()], "",
        f"**Overall** (all {len(true_pairs):,} true pairs, copy-vs-copy included): {len(found):,} pairs reported, "
        f"precision **{len(tp) / max(len(found), 1):.2%}**, recall **{len(tp) / len(true_pairs):.2%}**; "
        f"original-vs-copy recall **{sum(len(v) for v in pos.values()) and sum(tuple(sorted((k, truth[k]))) in found_set for kind in KINDS for _, _, k in pos[kind]) / sum(len(v) for v in pos.values()):.2%}**. "
        f"Clusters: {whole} of {n_groups} originals have all {len(KINDS) + 1} items in one cluster; "
        f"{mixed} clusters mix different originals. Exact hash alone: {sum(v[0] for v in exact.values())} of "
        f"{sum(v[2] for v in exact.values())} copies, {exact_fp} false matches.", "",
        "## Per source group", "",
        "| group | clips | copies | recall pair | recall cluster | false pairs touching |", "|---|---|---|---|---|---|",
        *group_rows, "",
        "## False positives", "",
    ]
    if fp_pairs:
        lines += ["| a | b | BER | frames |", "|---|---|---|---|"]
        for a, b, ber in fp_pairs[:30]:
            lines.append(f"| {a} | {b} | {ber:.3f} | {D.compare(fps[by_key[a]], fps[by_key[b]])[2]} |")
    else:
        lines.append("None: no pair of items from different originals was reported.")
    lines += [
        "", "Hard negatives, original vs original (BER at the best offset; *passing*: pairs the threshold would accept):", "",
        "| pairs | n | lowest BER | 1st pct | median | passing |", "|---|---|---|---|---|---|", *hard_rows, "",
        "## Misses", "",
    ]
    if missed:
        lines += ["Original-vs-copy pairs not reported (BER, frames compared, threshold at that length):", ""]
        for b, n, k in missed[:20]:
            lines.append(f"- {k}: BER {b:.3f} over {n} frames (threshold {D.threshold(n):.3f})"
                         + ("; still clustered through other copies" if cl[k] == cl[truth[k]] else ""))
        if len(missed) > 20:
            lines.append(f"- … {len(missed) - 20} more")
    else:
        lines.append("None.")
    lines += [
        "", "## Throughput and search", "",
        "| step (best of 3 passes) | seconds | audio s / s |", "|---|---|---|",
        f"| decode + mono + 24 kHz (`load`, originals only) | {t_load:.2f} | {orig_seconds / t_load:,.0f} |",
        f"| fingerprint (24 kHz wave → uint32s) | {t_fp:.2f} | {seconds / t_fp:,.0f} |",
        f"| `pcm_hash` | {t_hash:.2f} | {seconds / t_hash:,.0f} |", "",
        "| search | pairs compared | seconds | pairs reported |", "|---|---|---|---|",
        f"| LSH candidates (`candidate_pairs`) | {len(cand):,} candidates | {t_cand:.2f} | |",
        f"| index: candidates + BER verification (`near_duplicates`) | {len(cand):,} | {t_near:.2f} | {len(found):,} |",
    ]
    if brute is not None:
        bset = {(a, b) for a, b, _ in brute}
        lines += [
            f"| all pairs BER (`near_duplicates(index=False)`) | {total_pairs:,} ({compatible:,} with compatible lengths) | "
            f"{t_brute:.2f} | {len(brute):,} |", "",
            f"The index reports {len(found_set & bset):,} of the {len(bset):,} pairs all-pairs BER reports "
            f"(**{len(found_set & bset) / max(len(bset), 1):.2%}**), comparing {len(cand) / total_pairs:.3%} of the "
            f"pairs, {t_brute / t_near:.0f}× faster. Pairs all-pairs finds and the index misses: "
            f"{', '.join([f'{a} ~ {b} ({ber:.3f})' for a, b, ber in brute if (a, b) not in found_set][:8]) or 'none'}.",
        ]
    # scaling: the same on random subsets of the originals (each with all its copies)
    if brute is not None:
        lines += ["", "Scaling (random subsets of the originals, each with all its copies; same BER rule):", "",
                  "| items | pairs | candidates | index s | all pairs s | same answer |", "|---|---|---|---|---|---|"]
        sub_rng = np.random.default_rng(1)
        for share in (0.25, 0.5):
            chosen = set(sub_rng.choice(originals, size=int(share * len(originals)), replace=False).tolist())
            sub = [(k, f) for k, f in items if truth[k] in chosen]
            t0 = time.perf_counter()
            s_idx = D.near_duplicates(sub)
            t_i = time.perf_counter() - t0
            t0 = time.perf_counter()
            s_all = D.near_duplicates(sub, index=False)
            t_a = time.perf_counter() - t0
            s_idx_set = {(a, b) for a, b, _ in s_idx}
            lines.append(f"| {len(sub):,} | {len(sub) * (len(sub) - 1) // 2:,} | "
                         f"{len(D.candidate_pairs([f for _, f in sub])):,} | {t_i:.2f} | {t_a:.2f} | "
                         f"{len(s_idx_set & {(a, b) for a, b, _ in s_all})} of {len(s_all)} |")
        lines.append(f"| {n_items:,} | {total_pairs:,} | {len(cand):,} | {t_near:.2f} | {t_brute:.2f} | "
                     f"{len(found_set & bset)} of {len(bset)} |")

    # BER of every pair (all-pairs mode) or of the candidates: distributions and a threshold sweep
    if brute is not None:
        scored = [(keys[i], keys[j]) + D.compare(fps[i], fps[j])
                  for i in range(n_items) for j in range(i + 1, n_items)]
        scored_what = f"all {total_pairs:,} pairs"
    else:
        scored = [(keys[i], keys[j]) + D.compare(fps[i], fps[j]) for i, j in cand.tolist()]
        scored_what = f"the {len(cand):,} candidate pairs of the index"
    lines += ["", "## BER by length of comparison", "",
              f"Over {scored_what} (pairs whose lengths allow the overlap rule): true = same original, "
              "false = different originals; frames = non-silent frames compared at the best offset.", "",
              "| frames compared | seconds | threshold | true pairs | true p99 | true max | false pairs | false min | false 0.1st pct |",
              "|---|---|---|---|---|---|---|---|---|"]
    for lo, hi in [(D.MIN_VALID, D.SHORT_FRAMES), (D.SHORT_FRAMES, 64), (64, D.LONG_FRAMES), (D.LONG_FRAMES, 10 ** 9)]:
        t_b = np.array([ber for a, b, ber, _, n in scored if lo <= n < hi and truth[a] == truth[b]])
        f_b = np.array([ber for a, b, ber, _, n in scored if lo <= n < hi and truth[a] != truth[b]])
        sec = f"{lo / D.FRAMES_PER_SECOND:.2f}-{hi / D.FRAMES_PER_SECOND:.2f}" if hi < 10 ** 9 else f"≥ {lo / D.FRAMES_PER_SECOND:.2f}"
        th = f"{D.threshold(lo):.2f}-{D.threshold(hi):.2f}" if hi < 10 ** 9 else f"{D.BER_THRESHOLD:.2f}"
        lines.append(f"| {lo}-{hi - 1 if hi < 10 ** 9 else '…'} | {sec} | {th} | {t_b.size:,} | "
                     + (f"{np.percentile(t_b, 99):.3f} | {t_b.max():.3f}" if t_b.size else "- | -") + f" | {f_b.size:,} | "
                     + (f"{f_b.min():.3f} | {np.percentile(f_b, 0.1):.3f}" if f_b.size else "- | -") + " |")
    lines += ["", "## Threshold sweep", "",
              f"Over {scored_what}: short = threshold up to {D.SHORT_FRAMES} frames compared, "
              f"long = from {D.LONG_FRAMES} frames, linear between (the default is marked).", "",
              "| short | long | pairs | false pairs | precision | recall (all true pairs) | clusters mixing originals | originals with all copies in one cluster |",
              "|---|---|---|---|---|---|---|---|"]
    for short, long in [(0.14, 0.35), (0.16, 0.35), (0.18, 0.35), (0.20, 0.35), (0.22, 0.35), (0.25, 0.35),
                        (0.35, 0.35), (0.18, 0.30), (0.18, 0.40)]:
        got = [(a, b, ber) for a, b, ber, _, n in scored if n and ber <= D.threshold(n, long, short)]
        bad = sum(truth[a] != truth[b] for a, b, _ in got)
        c = key_components(keys, got)
        mix = sum(len({truth[k] for k in ms}) > 1 for ms in _members(c).values())
        full = sum(len({c[k] for k in grp}) == 1 for grp in _groups(keys, truth).values())
        mark = " (default)" if (short, long) == (D.SHORT_BER_THRESHOLD, D.BER_THRESHOLD) else ""
        lines.append(f"| {short}{mark} | {long} | {len(got):,} | {bad} | {(len(got) - bad) / max(len(got), 1):.2%} | "
                     f"{(len(got) - bad) / len(true_pairs):.2%} | {mix} | {full} / {n_groups} |")
    lines.append("")
    Path(args.out).write_text("\n".join(lines))
    print("\n".join(lines))


def _groups(keys, truth) -> dict:
    out = defaultdict(list)
    for k in keys:
        out[truth[k]].append(k)
    return out


def _members(cl: dict) -> dict:
    out = defaultdict(list)
    for k, root in cl.items():
        out[root].append(k)
    return out


def _short(path: str) -> str:
    return path.split("/")[-1][:40]


if __name__ == "__main__":
    sys.exit(main())
