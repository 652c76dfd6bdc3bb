"""The tokenize step of audio clips: bucket, encode with the audio codec, interleave.

A task takes one processed shard (a Lhotse Shar directory) and never talks to another task. Clips
that survived dedup and decontamination are grouped by lhotse's `DynamicBucketingSampler` into
batches of similar duration (at most `max_batch_seconds` of padded audio), in a fixed order. While
the codec encodes batch k, a loader thread reads and peak-normalises batch k+1 (-3 dBFS, as the
codec was trained; `curation.steps.encode.prefetch`). A batch is zero-padded to its longest clip;
each clip keeps ceil(samples/hop) codes minus the last `DROP_LAST` (padding makes them unstable).
The codes of every batch are checkpointed (`curation.steps.encode.BatchCodes`): a killed task
re-encodes only batches it had not saved.

Then the sequences are built in (recording, order) order: consecutive transcribed clips become
interleaved speech-text sequences and transcription pairs (`curation.steps.audio.interleave`), then
every clip with a translation (metadata `translation`) a translation pair, and clips in neither
become audio-only sequences (audio start, codes, audio end, end-of-document).
Sequences of up to 8,192 tokens form the stage-2 pool (the source's shards); longer ones the
long-context pool (the source's `.long_context` shards). Each sequence is written with the first
clip it holds (a clip record may carry several sequences, or none), so the shards hold the sequences
in build order; the step's notes count clips, seconds, codes, batches, padding, sequences by kind
and by pool (the ledger's `audio` table).
"""
from __future__ import annotations

import math
import time
from collections.abc import Iterator

import numpy as np
import torch

from curation.core.layout import LONG_CONTEXT
from curation.core.record import Record
from curation.core.vocab import Vocabulary
from curation.steps.audio.codec import WavTokenizerEncoder
from curation.steps.audio.ingest import peak_normalise
from curation.steps.audio.interleave import MAX_LEN, Clip, audio_tokens, build, translation
from curation.steps.base import ShardStep
from curation.steps.encode import BatchCodes, prefetch

DROP_LAST = 5


def bucketed_batches(cuts, n: int, max_batch_seconds: float, num_buckets: int = 10):
    """Batches of cuts from lhotse's dynamic bucketing sampler over a lazy CutSet of `n` cuts, in a fixed
    order (no shuffling; bucket edges estimated from all `n` durations)."""
    from lhotse.dataset import DynamicBucketingSampler
    if n == 0:
        return iter(())
    if n == 1:  # lhotse's bucketing needs two buckets at least (it asserts): one clip is one batch
        return iter([list(cuts)])
    return (list(b) for b in DynamicBucketingSampler(
        cuts, max_duration=max_batch_seconds, num_buckets=max(1, min(num_buckets, n)), shuffle=False,
        drop_last=False, num_cuts_for_bins_estimate=n, seed=0))


def padding_waste(batches: list[list[float]]) -> float:
    """Share of encoded samples that are padding, for batches given as clip durations."""
    total = sum(len(b) * max(b) for b in batches if b)
    return 1 - sum(sum(b) for b in batches) / total if total else 0.0


class AudioTokenizer(ShardStep):
    name = "tokenize"

    def __init__(self, vocab: Vocabulary, codec: WavTokenizerEncoder, *, max_batch_seconds: float, shar_dir,
                 interleave: bool = True, checkpoint: BatchCodes | None = None, prefetch: bool = True,
                 max_len: int = MAX_LEN, **kw):
        super().__init__(**kw)
        self.max_len = max_len   # longest sequence of the stage-2 pool
        self.vocab, self.codec, self.max_batch_seconds = vocab, codec, max_batch_seconds
        self.shar_dir, self.interleave, self.prefetch, self.checkpoint = shar_dir, interleave, prefetch, checkpoint
        self.timing = {"load": 0.0, "encode": 0.0, "wall": 0.0}
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

    def _encode(self, batch, loaded) -> list[np.ndarray]:
        wave, lengths = loaded
        start = time.perf_counter()
        codes = self.codec.encode(wave).numpy()
        self.timing["encode"] += time.perf_counter() - start
        hop = self.codec.hop
        return [codes[i, :max(0, math.ceil(lengths[i] / hop) - DROP_LAST)].astype(np.int16) for i in range(len(batch))]

    def encode_all(self, cuts, n: int) -> dict[str, np.ndarray]:
        """Codes per cut id; batches saved by an earlier attempt are reused. Cuts stream from the Shar
        shard: only the batch being encoded and the next one are in memory."""
        notes = self.stats.notes
        batches = list(bucketed_batches(cuts, n, self.max_batch_seconds))
        codes: dict[str, np.ndarray] = {}
        saved = {}
        for k, batch in enumerate(batches):
            notes["batches"] += 1
            notes["padded_seconds"] += len(batch) * max(c.duration for c in batch)
            if self.checkpoint is not None and (got := self.checkpoint.load(k, [c.id for c in batch])) is not None:
                saved[k] = got
        fresh = prefetch([k for k in range(len(batches)) if k not in saved], lambda k: self._load(batches[k]),
                         enabled=self.prefetch)
        for k, batch in enumerate(batches):
            if k in saved:
                out = saved[k]
            else:
                _, loaded = next(fresh)
                out = self._encode(batch, loaded)
                if self.checkpoint is not None:
                    self.checkpoint.save(k, [c.id for c in batch], out)
            codes.update({c.id: v for c, v in zip(batch, out)})
        return codes

    def _text_ids(self, texts: dict[str, str]) -> dict[str, np.ndarray]:
        """Text token ids (int32) per clip id, tokenized in one batch."""
        encoded = self.vocab.tokenizer.encode_batch(list(texts.values()), add_special_tokens=False) if texts else []
        return {cid: np.asarray(e.ids, dtype=np.int32) for cid, e in zip(texts, encoded)}

    def encode(self, records: list[Record]) -> Iterator[Record]:
        from lhotse import CutSet
        wall = time.perf_counter()
        notes = self.stats.notes
        notes.update(batches=0, padded_seconds=0.0)
        if not records:   # every clip of the shard was quarantined or removed: its Shar shard holds no cuts file
            return
        by_id = {r.id: r for r in records}
        cuts = CutSet.from_shar(in_dir=str(self.shar_dir)).filter(lambda c: c.id in by_id)  # lazy
        codes = self.encode_all(cuts, len(by_id))
        texts = self._text_ids({r.id: r.text for r in records})
        translations = self._text_ids({r.id: r.meta["translation"] for r in records if r.meta.get("translation")})
        clips, translated, unpaired, seconds = [], [], [], 0.0
        meta = sorted((str(c.custom["recording"]), int(c.custom["order"]), c.id, c.duration) for c in cuts)
        for recording, order, cid, duration in meta:
            clip = Clip(cid, recording, order, 0.0, duration, codes[cid].astype(np.int64), texts[cid],
                        translations.get(cid))
            seconds += duration
            paired = clip.transcribed and self.interleave
            if paired:
                clips.append(clip)
            if clip.translation is not None:
                translated.append(clip)
                notes["translation_text_tokens"] += clip.translation.size
            elif not paired:
                unpaired.append(clip)
        built = build(clips, self.vocab, max_len=self.max_len) + [translation(c, self.vocab, self.max_len)
                                                                  for c in translated]
        sequences = [(s.tokens, s.kind, s.pool, s.clip_ids[0]) for s in built]
        eod = np.asarray([self.vocab.eod_id], dtype=np.int32)
        for clip in unpaired:
            tokens = np.concatenate([audio_tokens(clip.codes, self.vocab), eod])
            sequences.append((tokens, "audio_only", "stage2" if tokens.size <= self.max_len else "long_context",
                              clip.id))
        order: list[Record] = []
        for tokens, kind, pool, anchor in sequences:
            # keep build order: a sequence goes with its first clip unless that clip's turn has passed
            record = by_id[anchor] if not by_id[anchor].shards or order[-1] is by_id[anchor] else order[-1]
            if not record.shards:
                order.append(record)
            record.shards.setdefault(LONG_CONTEXT if pool == "long_context" else "", []).append(tokens)
            notes[kind] += 1
            notes[pool] += 1
        notes.update(clips=len(meta), seconds=round(seconds, 3), codes=int(sum(v.size for v in codes.values())))
        self.timing["wall"] += time.perf_counter() - wall
        yield from order
        yield from (r for r in records if not r.shards)
