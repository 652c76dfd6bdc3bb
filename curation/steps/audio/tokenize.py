"""The tokenize step of audio clips: bucket, encode with the audio codec, interleave, write.

A task takes one processed shard (a Lhotse Shar directory) and never talks to another task. Clips
that survived dedup and decontamination are grouped by lhotse's `DynamicBucketingSampler` into
batches of similar duration (at most `max_batch_seconds` of padded audio), in a fixed order. While
the codec encodes batch k, a loader thread reads and peak-normalises batch k+1 (-3 dBFS, as the
codec was trained). A batch is zero-padded to its longest clip; each clip keeps ceil(samples/hop)
codes minus the last `DROP_LAST` (padding makes them unstable). The codes of every batch are saved
(`<part>.codes/<k>.npz`) as its checkpoint: a killed task re-encodes only batches it had not saved.

Then the sequences are built in (recording, order) order: consecutive transcribed clips become
interleaved speech-text sequences and transcription pairs (`curation.steps.audio.interleave`), clips
without a transcript become audio-only sequences (audio start, codes, audio end, end-of-document).
Sequences of up to 8,192 tokens form the stage-2 pool (the source's shards); longer ones the
long-context pool, written to the source's `.long_context` shards.
"""
from __future__ import annotations

import math
import os
import shutil
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import torch

from curation.core.record import Record
from curation.core.vocab import Vocabulary
from curation.shards import IndexedWriter
from curation.steps.audio.codec import WavTokenizerEncoder
from curation.steps.audio.ingest import peak_normalise
from curation.steps.audio.interleave import MAX_LEN, Clip, audio_tokens, build
from curation.steps.base import Step

DROP_LAST = 5


def bucketed_batches(cuts, n: int, max_batch_seconds: float, num_buckets: int = 10):
    """Batches of cuts from lhotse's dynamic bucketing sampler over a lazy CutSet of `n` cuts, in a fixed
    order (no shuffling; bucket edges estimated from all `n` durations)."""
    from lhotse.dataset import DynamicBucketingSampler
    if n == 0:
        return iter(())
    return (list(b) for b in DynamicBucketingSampler(
        cuts, max_duration=max_batch_seconds, num_buckets=max(1, min(num_buckets, n)), shuffle=False,
        drop_last=False, num_cuts_for_bins_estimate=n, seed=0))


def padding_waste(batches: list[list[float]]) -> float:
    """Share of encoded samples that are padding, for batches given as clip durations."""
    total = sum(len(b) * max(b) for b in batches if b)
    return 1 - sum(sum(b) for b in batches) / total if total else 0.0


class AudioTokenizer(Step):
    name = "tokenize"

    def __init__(self, vocab: Vocabulary, codec: WavTokenizerEncoder, *, max_batch_seconds: float,
                 interleave: bool = True, prefetch: bool = True, max_len: int = MAX_LEN, **kw):
        super().__init__(**kw)
        self.max_len = max_len   # longest sequence of the stage-2 pool
        self.vocab, self.codec, self.max_batch_seconds = vocab, codec, max_batch_seconds
        self.interleave, self.prefetch = interleave, prefetch
        self.timing = {"load": 0.0, "encode": 0.0, "wall": 0.0}
        self.counts: dict[str, float] = {}
        if codec.config["n_codes"] > vocab.block("audio").size:
            raise ValueError(f"the audio codec has {codec.config['n_codes']} codes; the vocabulary's audio "
                             f"block holds {vocab.block('audio').size}")

    def _load(self, batch) -> tuple[torch.Tensor, list[int]]:
        start = time.perf_counter()
        waves = [peak_normalise(c.load_audio()[0].astype(np.float32)) for c in batch]
        lengths = [w.size for w in waves]
        padded = np.zeros((len(waves), max(lengths)), dtype=np.float32)
        for i, w in enumerate(waves):
            padded[i, :w.size] = w
        self.timing["load"] += time.perf_counter() - start
        return torch.from_numpy(padded), lengths

    def _encode(self, batch, loaded, ckpt: Path) -> dict[str, np.ndarray]:
        pixels, lengths = loaded
        start = time.perf_counter()
        codes = self.codec.encode(pixels).numpy()
        self.timing["encode"] += time.perf_counter() - start
        hop = self.codec.hop
        out = {c.id: codes[i, :max(0, math.ceil(lengths[i] / hop) - DROP_LAST)].astype(np.int16)
               for i, c in enumerate(batch)}
        tmp = ckpt.with_name(ckpt.name + ".tmp.npz")
        np.savez(tmp, ids=np.asarray(list(out)), **{f"c{i}": v for i, v in enumerate(out.values())})
        os.replace(tmp, ckpt)
        return out

    def encode_all(self, cuts, n: int, codes_dir: Path, fingerprint: str) -> dict[str, np.ndarray]:
        """Codes per cut id; batches already saved under `codes_dir` (same fingerprint) are reused.
        Cuts stream from the Shar shard: only the batch being encoded and the next one are in memory."""
        stamp = codes_dir / "fingerprint"
        if not stamp.is_file() or stamp.read_text() != fingerprint:
            shutil.rmtree(codes_dir, ignore_errors=True)
            codes_dir.mkdir(parents=True)
            stamp.write_text(fingerprint)
        codes: dict[str, np.ndarray] = {}
        self.counts.update(batches=0, padded_seconds=0.0)

        def pending():
            for k, batch in enumerate(bucketed_batches(cuts, n, self.max_batch_seconds)):
                self.counts["batches"] += 1
                self.counts["padded_seconds"] += len(batch) * max(c.duration for c in batch)
                path = codes_dir / f"{k:06d}.npz"
                if path.is_file():
                    with np.load(path) as z:
                        codes.update({str(i): z[f"c{j}"] for j, i in enumerate(z["ids"])})
                else:
                    yield batch, path

        todo = pending()
        with ThreadPoolExecutor(max_workers=1) as pool:
            item = next(todo, None)
            nxt = pool.submit(self._load, item[0]) if item and self.prefetch else None
            while item is not None:
                batch, path = item
                if self.prefetch:
                    loaded = nxt.result()
                    item = next(todo, None)
                    nxt = pool.submit(self._load, item[0]) if item else None
                else:
                    loaded = self._load(batch)
                    item = next(todo, None)
                codes.update(self._encode(batch, loaded, path))
        return codes

    def write(self, records: list[Record], shar_dir: Path, writer: IndexedWriter, fingerprint: str,
              long_writer: IndexedWriter | None = None) -> None:
        """Sequences of the stage-2 pool go to `writer`, longer ones to `long_writer` (when given)."""
        from lhotse import CutSet
        wall = time.perf_counter()
        self.stats.records_in = len(records)
        keep = {r.id for r in records}
        cuts = CutSet.from_shar(in_dir=str(shar_dir)).filter(lambda c: c.id in keep)  # lazy
        codes = self.encode_all(cuts, len(keep), Path(f"{writer.prefix}.codes"), fingerprint)
        clips, unpaired, seconds = [], [], 0.0
        meta = sorted((str(c.custom["recording"]), int(c.custom["order"]), c.id, c.duration,
                       c.custom.get("text_tokens") or []) for c in cuts)
        for recording, order, cid, duration, text in meta:
            clip = Clip(cid, recording, order, 0.0, duration, codes[cid].astype(np.int64),
                        np.asarray(text, dtype=np.int32))
            seconds += duration
            (clips if clip.transcribed and self.interleave else unpaired).append(clip)
        sequences = [(s.tokens, s.kind, s.pool) for s in build(clips, self.vocab, max_len=self.max_len)]
        eod = np.asarray([self.vocab.eod_id], dtype=np.int32)
        for clip in unpaired:
            tokens = np.concatenate([audio_tokens(clip.codes, self.vocab), eod])
            sequences.append((tokens, "audio_only", "stage2" if tokens.size <= self.max_len else "long_context"))
        for tokens, kind, pool in sequences:
            (long_writer if pool == "long_context" and long_writer is not None else writer).add(tokens)
            self.counts[kind] = self.counts.get(kind, 0) + 1
            self.counts[pool] = self.counts.get(pool, 0) + 1
        self.counts.update({"clips": len(meta), "seconds": round(seconds, 3),
                            "codes": int(sum(v.size for v in codes.values()))})
        self.stats.records_out = len(meta)
        self.timing["wall"] += time.perf_counter() - wall
        self.stats.seconds += time.perf_counter() - wall

    @staticmethod
    def cleanup(writer: IndexedWriter) -> None:
        shutil.rmtree(f"{writer.prefix}.codes", ignore_errors=True)
