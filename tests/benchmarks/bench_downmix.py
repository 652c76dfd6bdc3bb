"""The stereo downmix (`curation.steps.audio.ingest.to_mono`) against the plain channel mean, on real clips.

Every multi-channel clip of ../shared/data/audio (one today: the JFK excerpt, a real two-channel
recording), then stereo built from the mono LJ Speech clips of recipes/audio/speech the way stereo
arises: dual mono, a spaced pair (the right channel delayed 0.1-3 ms), a level difference (-6 dB),
a second source on one channel, and one channel silent; and the failure cases: one channel inverted
(antiphase), partly inverted (-0.8 x + a little noise), inverted and delayed. For each: the channels'
correlation, the mean's power relative to the channels' mean power, which downmix `to_mono` picks,
whether its 16-bit PCM hash (what exact dedup compares) and its codes from the demo codec equal the
mean's, and the clip's peak after each downmix (below -50 dBFS is `silent`).

Usage: .venv/bin/python tests/benchmarks/bench_downmix.py → reports/benchmarks/downmix.md
"""
from __future__ import annotations

import csv
import math
import platform
import sys
from pathlib import Path

import numpy as np
import soundfile as sf

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))
AUDIO = REPO.parent / "shared" / "data" / "audio"
SPEECH = REPO / "recipes" / "audio" / "speech"


def _db(x: float) -> float:
    return 10 * math.log10(x) if x > 0 else -math.inf


def _cases() -> list[tuple[str, str, np.ndarray, int]]:
    """(group, name, (frames, channels) float32, sample rate)."""
    cases = []
    if (AUDIO / "manifest.csv").is_file():
        with open(AUDIO / "manifest.csv", newline="") as f:
            for row in csv.DictReader(f):
                path = AUDIO / row["file"]
                if path.is_file() and sf.info(str(path)).channels > 1:
                    data, sr = sf.read(str(path), dtype="float32", always_2d=True)
                    cases.append(("real", row["file"], data, sr))
    rng = np.random.default_rng(0)
    for clip in sorted(SPEECH.glob("LJ*.ogg"))[:4]:
        x, sr = sf.read(str(clip), dtype="float32")
        other, _ = sf.read(str(sorted(SPEECH.glob("LJ*.ogg"))[-1]), dtype="float32")
        other = np.resize(other, x.size)
        d = lambda ms, x=x, sr=sr: np.roll(x, int(sr * ms / 1000))  # noqa: E731
        noise = rng.normal(0, 0.003, x.size).astype(np.float32)
        for name, right in (("dual mono", x), ("spaced pair 0.1 ms", d(0.1)), ("spaced pair 0.5 ms", d(0.5)),
                            ("spaced pair 1 ms", d(1)), ("spaced pair 2 ms", d(2)), ("spaced pair 3 ms", d(3)), ("right -6 dB", 0.5 * x),
                            ("second voice on the right", other), ("right silent", 0 * x)):
            cases.append(("normal", f"{clip.stem}: {name}", np.stack([x, right], 1).astype(np.float32), sr))
        for name, right in (("antiphase", -x), ("partly antiphase (-0.8x + noise)", -0.8 * x + noise),
                            ("antiphase, delayed 0.1 ms", -d(0.1))):
            cases.append(("cancelling", f"{clip.stem}: {name}", np.stack([x, right], 1).astype(np.float32), sr))
    return cases


def main() -> None:
    import soxr
    import torch

    from curation.steps.audio.codec import WavTokenizerEncoder
    from curation.steps.audio.fingerprint import pcm_hash
    from curation.steps.audio.ingest import SAMPLE_RATE, to_mono
    from curation.steps.codecs import load_codec
    codec = load_codec(str(REPO / "tokenizers" / "curate-demo-wavtokenizer.yaml"), WavTokenizerEncoder)

    def at24k(mono: np.ndarray, sr: int) -> np.ndarray:
        return soxr.resample(mono, sr, SAMPLE_RATE, quality="HQ").astype(np.float32) if sr != SAMPLE_RATE else mono

    def codes(wave: np.ndarray) -> np.ndarray:
        peak = float(np.abs(wave).max())
        scaled = wave * (10 ** (-3 / 20) / peak) if peak else wave
        with torch.no_grad():
            return codec.encode(torch.from_numpy(np.ascontiguousarray(scaled[None, :]))).numpy()

    rows, changed = [], {"normal": 0, "real": 0, "cancelling": 0}
    counts = {"normal": 0, "real": 0, "cancelling": 0}
    for group, name, data, sr in _cases():
        mean = data.mean(axis=1, dtype=np.float32)
        ours = to_mono(data)
        power = (data.astype(np.float64) ** 2).mean(axis=0)
        rel = _db(float((mean.astype(np.float64) ** 2).mean()) / float(power.mean()))
        corr = float(np.corrcoef(data.T)[0, 1]) if data.std(axis=0).min() > 0 else float("nan")
        picked = "mean" if np.array_equal(ours, mean) else f"channel {int(np.argmax(power))}"
        m24, o24 = at24k(mean, sr), at24k(ours, sr)
        same_hash = pcm_hash(m24) == pcm_hash(o24)
        same_codes = bool(np.array_equal(codes(m24), codes(o24))) if np.abs(m24).max() > 0 else False
        peaks = [20 * math.log10(float(np.abs(w).max())) if np.abs(w).max() > 0 else -math.inf for w in (m24, o24)]
        counts[group] += 1
        changed[group] += not same_hash
        rows.append(f"| {group} | {name} | {corr:+.3f} | {rel:+.1f} | {picked} | {'yes' if same_hash else 'no'} | "
                    f"{'yes' if same_codes else 'no'} | {peaks[0]:.1f} | {peaks[1]:.1f} |")
    out = REPO / "reports" / "benchmarks" / "downmix.md"
    out.write_text(f"""# Stereo downmix: channel mean unless it cancels

`python tests/benchmarks/bench_downmix.py` on {platform.machine()}, Python {platform.python_version()}.
`to_mono` keeps the channel mean (what lhotse's and ffmpeg's downmixes do) unless the mean keeps less
than a tenth (-10 dB) of the channels' mean power, then the channel with the most power. Uncorrelated
channels keep half the power in a mean (-3 dB) and identical ones all of it, so only strongly
anti-correlated channels (correlation below -0.8 for equal levels) switch; spaced pairs, whose mean
is comb-filtered, stay above it. Peak is after resampling to 24 kHz, before
peak normalisation; `silent` is a peak below -50 dBFS.

Changed PCM hash (what exact dedup compares) against the mean: real multi-channel clips
{changed['real']} of {counts['real']}, normal stereo {changed['normal']} of {counts['normal']},
cancelling stereo {changed['cancelling']} of {counts['cancelling']}.

| group | clip | correlation | mean power vs channels (dB) | to_mono picks | same PCM hash | same codes | peak of mean (dBFS) | peak of to_mono (dBFS) |
|---|---|---|---|---|---|---|---|---|
""" + "\n".join(rows) + "\n")
    print(out.read_text())


if __name__ == "__main__":
    main()
