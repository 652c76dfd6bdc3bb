"""Audio ingest (`raw/` → `processed/`): clip manifests in, checked 24 kHz mono clips out.

`AudioManifestReader` reads a JSONL manifest, one clip per line (field names in `recipe.schema.Audio`):
the audio file (relative to the manifest), optional segment times, transcript, recording, clip order,
speaker and language, and a translation of the speech (kept in the metadata as `translation` /
`translation_language` when the source names a `translation_field`; a value that is not text is
quarantined, `bad_translation`, and so is a clip whose `translation_language_field` names another
language than the source's `translation_language`, `translation_language_mismatch`). `AudioCheck` decodes the clip (soundfile: wav, flac, ogg, mp3), mixes it to
mono, resamples it to 24 kHz (soxr, high quality) and quarantines, with a reason: files that do not
decode (`undecodable_audio`), empty clips (`empty_audio`), clips shorter or longer than the recipe
allows (`too_short`, `too_long`), silence (`silent`: peak under `silence_dbfs`) and transcripts whose
length does not fit the duration (`transcript_mismatch`: characters per second outside the range), and
translations that do not (`translation_mismatch`, the same range).

The processed shard keeps the clips as a Lhotse Shar directory (`SharShard`): 24 kHz FLAC recordings
and one supervision per transcribed clip (text, language, speaker, recording, order).
"""
from __future__ import annotations

import io
import json
import math
from collections.abc import Iterator
from pathlib import Path

import numpy as np

from curation.core.record import Record
from curation.errors import RecordError
from curation.steps.base import Reader, Reject, Step

SAMPLE_RATE = 24_000
PEAK_DBFS = -3.0


def load_clip(path: Path, start: float | None = None, end: float | None = None) -> np.ndarray:
    """Decode (a segment of) a file to float32 mono at 24 kHz."""
    import soundfile as sf
    import soxr
    try:
        with sf.SoundFile(str(path)) as f:
            sr = f.samplerate
            first = int(round((start or 0.0) * sr))
            frames = -1 if end is None else max(0, int(round(end * sr)) - first)
            f.seek(first)
            data = f.read(frames, dtype="float32", always_2d=True)
    except (sf.LibsndfileError, RuntimeError, OSError, ValueError) as e:
        raise RecordError("undecodable_audio", f"{path.name}: {e}") from None
    mono = data.mean(axis=1, dtype=np.float32)
    if sr != SAMPLE_RATE and mono.size:
        mono = soxr.resample(mono, sr, SAMPLE_RATE, quality="HQ").astype(np.float32)
    return np.ascontiguousarray(mono)


def peak_normalise(wave: np.ndarray, dbfs: float = PEAK_DBFS) -> np.ndarray:
    """Scale so the peak sits at `dbfs` (the codec was trained on peak-normalised audio)."""
    peak = float(np.abs(wave).max()) if wave.size else 0.0
    return wave if peak == 0 else (wave * (10 ** (dbfs / 20) / peak)).astype(np.float32)


class AudioManifestReader(Reader):
    def __init__(self, path: Path, *, settings, text_field: str, id_field: str | None, metadata_fields: list[str],
                 shard_label: str, **kw):
        super().__init__(path, shard_label=shard_label, **kw)
        self.a, self.text_field, self.id_field, self.metadata_fields = settings, text_field, id_field, metadata_fields

    def parse(self) -> Iterator[Record | Reject]:
        with open(self.path, "rb") as f:
            for n, raw in enumerate(f, start=1):
                if not raw.strip():
                    continue
                loc = f"{self.shard_label}:{n}"
                try:
                    obj = json.loads(raw.decode("utf-8"))
                    if not isinstance(obj, dict):
                        raise ValueError("not a JSON object")
                except (UnicodeDecodeError, ValueError) as e:
                    yield Reject(loc, "bad_json", f"{self.path} line {n}: {e}", raw[:2000].decode("utf-8", "replace"))
                    continue
                audio = obj.get(self.a.audio_field)
                if not isinstance(audio, str) or not audio:
                    yield Reject(loc, "no_audio", f"{self.path} line {n}: no file in {self.a.audio_field!r}")
                    continue
                rid = str(obj[self.id_field]) if self.id_field and obj.get(self.id_field) is not None else \
                    Path(audio).stem + (f"@{obj[self.a.start_field]}" if obj.get(self.a.start_field) is not None else "")
                text = obj.get(self.text_field)
                translation = obj.get(self.a.translation_field) if self.a.translation_field else None
                if translation is not None and not isinstance(translation, str):
                    yield Reject(loc, "bad_translation", f"{self.path} line {n}: {self.a.translation_field!r} "
                                 f"holds {type(translation).__name__}, not text")
                    continue
                target = obj.get(self.a.translation_language_field) if translation else None
                if target is not None and str(target) != self.a.translation_language:
                    yield Reject(loc, "translation_language_mismatch", f"{self.path} line {n}: a translation into "
                                 f"{target!r}; this source's translation_language is {self.a.translation_language!r}"
                                 f" (one target language per source: translation pairs do not name it)")
                    continue
                meta = {k: obj[k] for k in self.metadata_fields if k in obj}
                meta.update({"file": audio, "recording": str(obj.get(self.a.recording_field) or rid),
                             "order": int(obj.get(self.a.order_field) or 0),
                             "start": obj.get(self.a.start_field), "end": obj.get(self.a.end_field),
                             "speaker": obj.get(self.a.speaker_field), "language": obj.get(self.a.language_field)})
                if translation and translation.strip():   # only then: other sources' metadata stays as it was
                    meta.update({"translation": translation, "translation_language": self.a.translation_language})
                yield Record(id=rid, source=self.source, text=text if isinstance(text, str) else "", meta=meta)


class AudioCheck(Step):
    """Decode, resample and check one clip; keeps the 24 kHz PCM in `record.audio`."""
    name = "audio_check"

    def __init__(self, *, settings, base: Path, **kw):
        super().__init__(**kw)
        self.a, self.base = settings, base

    def process(self, record: Record) -> Record:
        m = record.meta
        path = (self.base / m["file"]).resolve()
        if not path.is_file():
            raise RecordError("undecodable_audio", f"{m['file']}: no such file next to the manifest")
        wave = load_clip(path, m.get("start"), m.get("end"))
        seconds = wave.size / SAMPLE_RATE
        if wave.size == 0:
            raise RecordError("empty_audio", f"{m['file']}: no samples")
        if seconds < self.a.min_seconds:
            raise RecordError("too_short", f"{m['file']}: {seconds:.2f} s < min_seconds {self.a.min_seconds}")
        if seconds > self.a.max_seconds:
            raise RecordError("too_long", f"{m['file']}: {seconds:.1f} s > max_seconds {self.a.max_seconds}")
        peak = float(np.abs(wave).max())
        peak_db = 20 * math.log10(peak) if peak > 0 else -math.inf
        if peak_db < self.a.silence_dbfs:
            raise RecordError("silent", f"{m['file']}: peak {peak_db:.1f} dBFS < silence_dbfs {self.a.silence_dbfs}")
        if record.text:
            rate = len(record.text) / seconds
            lo, hi = self.a.chars_per_second
            if not lo <= rate <= hi:
                raise RecordError("transcript_mismatch", f"{m['file']}: {len(record.text)} characters for "
                                  f"{seconds:.2f} s ({rate:.1f}/s, allowed {lo}-{hi})")
        if m.get("translation"):
            rate = len(m["translation"]) / seconds
            lo, hi = self.a.chars_per_second
            if not lo <= rate <= hi:
                raise RecordError("translation_mismatch", f"{m['file']}: {len(m['translation'])} characters of "
                                  f"translation for {seconds:.2f} s ({rate:.1f}/s, allowed {lo}-{hi})")
        m.update({"seconds": round(seconds, 4), "samples": int(wave.size)})
        record.audio = wave
        return record


def flac_bytes(wave: np.ndarray) -> bytes:
    import soundfile as sf
    buf = io.BytesIO()
    sf.write(buf, np.clip(wave, -1, 1), SAMPLE_RATE, format="FLAC", subtype="PCM_24")
    return buf.getvalue()


class SharShard:
    """The clips of one processed shard as a Lhotse Shar shard, written as they stream in: cuts with
    supervisions (transcript, language, speaker, recording, order) and 24 kHz FLAC recordings. The
    folder is renamed into place on `close`."""

    def __init__(self, folder: Path):
        import shutil

        from lhotse.shar import SharWriter
        self.folder, self.tmp = Path(folder), Path(folder).with_name(Path(folder).name + ".tmp")
        shutil.rmtree(self.tmp, ignore_errors=True)
        self.tmp.mkdir(parents=True)
        self._writer = SharWriter(str(self.tmp), fields={"recording": "flac"}, shard_size=None)
        self._writer.__enter__()

    def add(self, r: Record) -> None:
        from lhotse import MonoCut, Recording, SupervisionSegment
        rec = Recording.from_bytes(flac_bytes(r.audio), recording_id=r.id)
        m = r.meta
        sups = [SupervisionSegment(id=r.id, recording_id=r.id, start=0, duration=rec.duration, text=r.text,
                                   language=m.get("language"), speaker=m.get("speaker"),
                                   custom={"recording": m["recording"], "order": m["order"]})] if r.text else []
        self._writer.write(MonoCut(id=r.id, start=0, duration=rec.duration, channel=0, recording=rec,
                                   supervisions=sups, custom={"recording": m["recording"], "order": m["order"]}))

    def close(self) -> None:
        import shutil
        self._writer.__exit__(None, None, None)
        shutil.rmtree(self.folder, ignore_errors=True)
        self.tmp.rename(self.folder)

    def abort(self) -> None:
        import shutil
        self._writer.__exit__(None, None, None)
        shutil.rmtree(self.tmp, ignore_errors=True)
