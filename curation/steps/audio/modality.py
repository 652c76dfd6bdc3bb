"""The audio modality: clip manifests, checked 24 kHz mono clips kept as a Lhotse Shar shard beside the
processed table, encoded with the WavTokenizer-family codec and laid out as interleaved speech-text,
transcription, translation and audio-only sequences (`curation.steps.audio.tokenize`).

Decontamination sees a clip's transcript and its translation (`decont_text`): a benchmark item that
equals either removes the clip."""
from __future__ import annotations

import json
from functools import partial
from pathlib import Path

import pyarrow as pa

from curation.core.contain import name_digests
from curation.core.hashing import fingerprint
from curation.core.layout import LONG_CONTEXT, shar_dir
from curation.core.vocab import Vocabulary
from curation.steps.audio.declaration import audio_settings
from curation.steps.audio.fingerprint import fingerprint as spectral_fingerprint
from curation.steps.audio.fingerprint import pcm_hash
from curation.steps.audio.ingest import AudioCheck, AudioManifestReader, SharShard
from curation.steps.base import StepSpec
from curation.steps.device import device_resources, device_settings, placed
from curation.steps.encode import one_thread
from curation.steps.modality import LedgerTable, Modality, ProcessedWriter

# the clip checks read these audio settings; the others belong to tokenization and dedup
CHECKED = ("audio_field", "recording_field", "order_field", "start_field", "end_field", "speaker_field",
           "language_field", "translation_field", "translation_language", "translation_language_field", "min_seconds", "max_seconds",
           "silence_dbfs", "chars_per_second")


def _reader(src, path: Path, **kw):
    return AudioManifestReader(path, settings=audio_settings(src), text_field=src.input.text_field,
                               id_field=src.input.id_field, metadata_fields=src.input.metadata_fields, **kw)


def _reader_settings(src) -> dict:
    a = audio_settings(src)
    return {"text_field": src.input.text_field, "id_field": src.input.id_field,
            "metadata_fields": src.input.metadata_fields,
            **{k: getattr(a, k) for k in CHECKED if k.endswith("_field")}}


def _checks(src, path: Path, base_dir: Path) -> list[StepSpec]:
    a = audio_settings(src)
    roots = src.input.allowed_roots(base_dir)
    return [StepSpec("audio_check", {**a.model_dump(mode="json", include=set(CHECKED)),
                                     "allow_roots": [str(r) for r in roots]},
                     partial(AudioCheck, settings=a, base=Path(path).parent, allow_roots=roots))]


def manifest_files(src, manifest: Path, base_dir: Path | None = None) -> str:
    """Content hash of the audio files a clip manifest names. A missing file, or one the source may not
    read (outside the manifest's folder and `input.allow_roots`), counts as absent: the check quarantines
    it later, and nothing outside the tree is ever read, not even to hash it."""
    names = set()
    for line in Path(manifest).read_bytes().splitlines():
        try:
            names.add(str(json.loads(line.decode("utf-8", "surrogateescape"))[audio_settings(src).audio_field]))
        except (ValueError, KeyError, TypeError):
            continue
    base = Path(manifest).parent
    # without the recipe's folder only absolute allowed roots are known (relative ones count as absent)
    roots = src.input.allowed_roots(base_dir) if base_dir is not None else \
        [Path(r) for r in src.input.allow_roots if Path(r).is_absolute()]
    return fingerprint(name_digests(names, base, roots))


class AudioProcessedWriter(ProcessedWriter):
    """The processed table plus the Shar shard the codec reads."""

    def __init__(self, modality, path: Path, *, out: Path, source: str, shard: str):
        super().__init__(modality, path)
        self.shar = SharShard(shar_dir(out, source, shard))

    def add(self, record) -> None:
        super().add(record)
        self.shar.add(record)

    def close(self) -> list[Path]:
        files = super().close()
        self.shar.close()
        return [*files, *sorted(self.shar.folder.iterdir())]   # cuts and recordings: the codec reads both

    def abort(self) -> None:
        super().abort()
        self.shar.abort()


def _encoder(src, run: dict) -> StepSpec:
    a = audio_settings(src)
    settings = {"max_batch_seconds": a.max_batch_seconds, "interleave": a.interleave, "max_len": a.stage2_max_tokens}

    def build(**kw):
        # torch: only audio runs need it
        from curation.steps.audio.codec import WavTokenizerEncoder
        from curation.steps.audio.tokenize import AudioTokenizer
        from curation.steps.codecs import load_codec
        one_thread()
        step = AudioTokenizer(Vocabulary.cached(run["vocab"]), load_codec(run["audio_codec"], WavTokenizerEncoder), **settings,
                              shar_dir=shar_dir(kw["out"], kw["source"], kw["shard"]),
                              checkpoint=kw.get("checkpoint"), source=kw["source"], sink=kw["sink"])
        return placed(step, {"codec": ("audio", a)})
    return StepSpec("tokenize", {"vocab": run["vocab_sha256"], "tokenizer": run["tokenizer_sha256"],
                                 "codec": run["audio_codec_sha256"], **settings, **device_settings(a)}, build,
                    device_resources(a))


def _ledger_row(run: str, src, totals: dict, counts: dict) -> dict:
    """One source's audio accounting: clips, hours, codes and paired text, sequences by kind and pool."""
    n = totals["tokenize"].notes if "tokenize" in totals else {}
    g = lambda k: int(n.get(k, 0))  # noqa: E731
    return {"run": run, "source": src.name, "category": src.category, "clips": g("clips"),
            "hours": round(n.get("seconds", 0) / 3600, 6), "audio_codes": g("codes"),
            "audio_tokens": counts["audio"], "paired_text_tokens": counts["text"],
            "interleaved": g("interleaved"), "transcription": g("transcription"), "translation": g("translation"),
            "translation_text_tokens": g("translation_text_tokens"), "audio_only": g("audio_only"),
            "stage2_pool": g("stage2"), "long_context_pool": g("long_context"), "batches": g("batches"),
            "padding_pct": round(100 * (1 - n.get("seconds", 0) / n["padded_seconds"]), 3)
            if n.get("padded_seconds") else 0.0}


AUDIO_TABLE = pa.schema([("run", pa.string()), ("source", pa.string()), ("category", pa.string()),
                         ("clips", pa.int64()), ("hours", pa.float64()), ("audio_codes", pa.int64()),
                         ("audio_tokens", pa.int64()), ("paired_text_tokens", pa.int64()),
                         ("interleaved", pa.int64()), ("transcription", pa.int64()), ("translation", pa.int64()),
                         ("translation_text_tokens", pa.int64()), ("audio_only", pa.int64()),
                         ("stage2_pool", pa.int64()), ("long_context_pool", pa.int64()), ("batches", pa.int64()),
                         ("padding_pct", pa.float64())])


def _decont_text(transcript: str, meta: dict) -> str:
    """The transcript and the translation, one per line. The n-grams spanning the line break only add
    to the clip's: a benchmark item equal to either text still finds all of its n-grams there."""
    return "\n".join(t for t in (transcript, meta.get("translation")) if t)


AUDIO = Modality(
    name="audio",
    extra_columns=[("fingerprint", pa.binary())],
    content_hash=lambda r: pcm_hash(r.payload["audio"])[:16],
    extra_row=lambda r: {"fingerprint": spectral_fingerprint(r.payload["audio"]).astype("<u4").tobytes()},
    reader=_reader,
    reader_settings=_reader_settings,
    checks=_checks,
    encoder=_encoder,
    outputs=lambda src: ("", LONG_CONTEXT),
    processed_writer=AudioProcessedWriter,
    codec="audio_tokenizer",
    ledger_table=LedgerTable("audio", AUDIO_TABLE, _ledger_row),
    input_files=manifest_files,
    decont_text=_decont_text,
)
