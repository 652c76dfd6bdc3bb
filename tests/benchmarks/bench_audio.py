"""Audio: ingest throughput, padding waste of bucketed vs fixed-size batches, codec share of wall time.

Real clips from ../shared/data/audio (LJ Speech, LibriSpeech, AMI/JFK, FSDD digits with transcripts;
music and other sounds without), through the same steps `curate run` uses: the manifest reader and
`AudioCheck` (decode, mono, 24 kHz via soxr, checks), then `write_shar` (Lhotse Shar, FLAC) with the
transcripts tokenized. Then `AudioTokenizer.encode_all` (lhotse dynamic bucketing, the seeded demo
WavTokenizer-family codec, CPU float32) with the loader thread on and off. `--repeat` lists every
clip that many times (as distinct ids) for a longer run.

Usage: .venv/bin/python tests/benchmarks/bench_audio.py [--repeat 3] → reports/benchmarks/audio.md
"""
from __future__ import annotations

import argparse
import csv
import json
import os
import platform
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))
AUDIO = REPO.parent / "shared" / "data" / "audio"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--max-batch-seconds", type=float, default=120.0)
    args = ap.parse_args()
    if not AUDIO.is_dir():
        print(f"skipped: {AUDIO} is absent (the benchmark needs ../shared/data)")
        return
    import torch
    from lhotse import CutSet

    from curation.core.record import QuarantineSink
    from curation.core.vocab import Vocabulary
    from curation.steps.audio.codec import WavTokenizerEncoder
    from curation.steps.audio.declaration import Audio
    from curation.steps.audio.ingest import AudioCheck, AudioManifestReader, write_shar
    from curation.steps.audio.tokenize import (
        AudioTokenizer,
        bucketed_batches,
        padding_waste,
    )
    from curation.steps.codecs import load_codec

    rows = list(csv.DictReader(open(AUDIO / "manifest.csv")))
    vocab = Vocabulary.load(REPO / "tokenizers" / "curate-demo-v1.yaml")
    settings = Audio(min_seconds=0.2, chars_per_second=(0.5, 40.0))
    out = {}
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        manifest = tmp / "clips.jsonl"
        with manifest.open("w") as f:
            for k in range(args.repeat):
                for r in rows:
                    f.write(json.dumps({"id": f"{k}/{r['file']}", "audio": str(AUDIO / r["file"]),
                                        "text": r["transcript"], "recording": f"{k}/{r['recording_group'] or r['file']}",
                                        "speaker": r["speaker"]}) + "\n")
        sink = QuarantineSink()
        t = time.perf_counter()
        reader = AudioManifestReader(manifest, settings=settings, text_field="text", id_field="id",
                                     metadata_fields=[], shard_label="bench", source="bench", sink=sink)
        check = AudioCheck(settings=settings, base=Path("/"), source="bench", sink=sink)
        records = list(check.run(reader.run()))
        t_check = time.perf_counter() - t
        t = time.perf_counter()
        ids = [e.ids for e in vocab.tokenizer.encode_batch([r.text for r in records], add_special_tokens=False)]
        write_shar(tmp / "shard.shar", records, ids)
        t_shar = time.perf_counter() - t
        seconds = sum(r.payload["audio"].size for r in records) / 24000
        quarantined = dict(check.stats.quarantined)

        durations = [r.payload["audio"].size / 24000 for r in records]
        cuts = CutSet.from_shar(in_dir=str(tmp / "shard.shar"))
        bucketed = [[c.duration for c in b] for b in bucketed_batches(cuts, len(records), args.max_batch_seconds)]
        per = max(1, round(len(records) / len(bucketed)))
        naive = [durations[i:i + per] for i in range(0, len(durations), per)]

        codec = load_codec(str(REPO / "tokenizers" / "curate-demo-wavtokenizer.yaml"), WavTokenizerEncoder)
        for name, prefetch in (("off", False), ("prefetch", True)):
            tok = AudioTokenizer(vocab, codec, max_batch_seconds=args.max_batch_seconds, prefetch=prefetch,
                                 source="bench", sink=sink)
            t = time.perf_counter()
            tok.encode_all(CutSet.from_shar(in_dir=str(tmp / "shard.shar")), len(records), tmp / f"codes-{name}",
                           name)
            wall = time.perf_counter() - t
            out[name] = dict(tok.timing, wall=wall)
    lines = [
        "# Audio: ingest, bucketing, codec share", "",
        f"Produced by `.venv/bin/python tests/benchmarks/bench_audio.py --repeat {args.repeat}` on "
        f"{time.strftime('%Y-%m-%d')}, {platform.machine()}, {os.cpu_count()} CPUs, Python "
        f"{platform.python_version()}, {torch.get_num_threads()} torch threads.", "",
        f"The {len(rows)} clips of `../shared/data/audio` (speech with transcripts, digits, music, other sounds; "
        f"wav/flac/ogg at 8-44.1 kHz), listed {args.repeat}× as distinct clips: {len(rows) * args.repeat} clips, "
        f"{len(records)} kept ({seconds / 60:.1f} minutes at 24 kHz); quarantined: {quarantined or 'none'}.", "",
        "## Ingest", "",
        "| phase | seconds | clips/s | audio seconds per second |", "|---|---|---|---|",
        f"| read + decode + mono + resample to 24 kHz + checks | {t_check:.2f} | {len(records) / t_check:,.0f} | "
        f"{seconds / t_check:,.0f} |",
        f"| transcripts tokenized + Lhotse Shar (FLAC) written | {t_shar:.2f} | {len(records) / t_shar:,.0f} | "
        f"{seconds / t_shar:,.0f} |",
        f"| ingest in all | {t_check + t_shar:.2f} | {len(records) / (t_check + t_shar):,.0f} | "
        f"{seconds / (t_check + t_shar):,.0f} |", "",
        "## Padding waste", "",
        f"Encoder batches pad every clip to the batch's longest. lhotse's `DynamicBucketingSampler` "
        f"(max {args.max_batch_seconds:.0f} s of padded audio per batch, 10 buckets) against naive batches of "
        f"{per} consecutive clips (the same number of batches):", "",
        "| batching | batches | padding (share of encoded samples) |", "|---|---|---|",
        f"| bucketed | {len(bucketed)} | {100 * padding_waste(bucketed):.1f}% |",
        f"| fixed size, manifest order | {len(naive)} | {100 * padding_waste(naive):.1f}% |", "",
        "## Codec share of wall time", "",
        "`AudioTokenizer.encode_all` over the Shar shard: reading and peak-normalising a batch (loader) and "
        "encoding it (codec).", "",
        "| loader | wall s | loader s | codec s | codec share |", "|---|---|---|---|---|",
        *[f"| {name} | {t['wall']:.2f} | {t['load']:.2f} | {t['encode']:.2f} | {100 * t['encode'] / t['wall']:.0f}% |"
          for name, t in out.items()], "",
        "No GPU machine was lent to this task: codec throughput on CUDA and GPU-vs-CPU code equality are not "
        "measured here (`tests/steps/audio/test_audio_codec.py` pins the float32 contract on CPU).", "",
    ]
    (REPO / "reports" / "benchmarks" / "audio.md").write_text("\n".join(lines))
    print("\n".join(lines))


if __name__ == "__main__":
    sys.exit(main())
