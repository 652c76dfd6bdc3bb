"""Audio ingest (`raw/` → `processed/`): clip manifests in, checked 24 kHz mono clips out.

`AudioManifestReader` reads a JSONL manifest, one clip per line (field names in `curation.steps.audio.declaration.Audio`):
the audio file (relative to the manifest), optional segment times, transcript, recording, clip order,
speaker and language, and a translation of the speech (kept in the metadata as `translation` /
`translation_language` when the source names a `translation_field`). A line it cannot take is
quarantined with a reason: `bad_json` (not a JSON object, or text that is not UTF-8 outside the
transcript), `no_audio`, `bad_transcript_encoding` (a transcript that is not UTF-8, or holds a lone
surrogate escape: treated like image captions), `bad_transcript` (not a string), `bad_translation` (a
translation that is not a string or not UTF-8), `translation_language_mismatch` (its
`translation_language_field` names another language than the source's `translation_language`),
`bad_order` (not an integer), `bad_segment` (start/end not finite numbers, negative, or end not after
start; `AudioCheck` adds a start at or past the end of the file), `bad_field` (id, recording, speaker or language not a string or integer).

`AudioCheck` opens the file only inside the manifest's folder or `input.allow_roots`
(`curation.core.contain`: `path_outside_input` for `..` and absolute names outside them,
`link_outside_input` for links out), decodes it (soundfile: wav, flac, ogg, mp3), mixes it to mono
(`to_mono`), resamples it to 24 kHz (soxr, high quality) and quarantines, with a reason: files that do
not decode (`undecodable_audio`), samples that are NaN or infinite (`nan_audio`), empty clips
(`empty_audio`), clips shorter or longer than the recipe allows (`too_short`, `too_long`), silence
(`silent`: peak under `silence_dbfs`) and transcripts whose length does not fit the duration
(`transcript_mismatch`: characters per second outside the range), and translations that do not
(`translation_mismatch`, the same range).

The processed shard keeps the clips as a Lhotse Shar directory (`SharShard`): 24 kHz FLAC recordings
and one supervision per transcribed clip (text, language, speaker, recording, order).
"""
from __future__ import annotations

import io
import json
import math
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO

import numpy as np

from curation.core.contain import InputTree, Refusal
from curation.core.record import Record
from curation.errors import RecordError
from curation.steps.base import Reader, Reject, Step

SAMPLE_RATE = 24_000
PEAK_DBFS = -3.0
# the channel mean keeps at least this share of the channels' mean power unless channels cancel:
# uncorrelated channels keep 1/2 (-3 dB), identical ones all of it, spaced microphone pairs measured
# down to -5.7 dB; below 1/10 (-10 dB) they are anti-correlated (correlation < -0.8 for channels of
# equal power) and the loudest channel is kept (reports/benchmarks/downmix.md)
MIN_MEAN_POWER = 0.1


def to_mono(data: np.ndarray) -> np.ndarray:
    """(frames, channels) → mono: the channel mean, unless it keeps less than `MIN_MEAN_POWER` of the
    channels' mean power (channels in antiphase, wholly or partly, cancel in a mean), then the channel
    with the most power. Normal stereo keeps the mean bit for bit (reports/benchmarks/downmix.md)."""
    if data.shape[1] == 1:
        return np.ascontiguousarray(data[:, 0])
    mono = data.mean(axis=1, dtype=np.float32)
    power = np.einsum("ij,ij->j", data, data, dtype=np.float64) / max(1, data.shape[0])
    if float(np.dot(mono, mono.astype(np.float64))) / max(1, mono.size) >= MIN_MEAN_POWER * float(power.mean()):
        return mono
    return np.ascontiguousarray(data[:, int(np.argmax(power))])


def load_clip(source: Path | BinaryIO, start: float | None = None, end: float | None = None,
              name: str | None = None) -> np.ndarray:
    """Decode (a segment of) a file, given as a path or an open binary file, to float32 mono at 24 kHz."""
    import soundfile as sf
    import soxr
    name = name or Path(getattr(source, "name", str(source))).name
    try:
        with sf.SoundFile(source if not isinstance(source, Path) else str(source)) as f:
            sr = f.samplerate
            first = int(round((start or 0.0) * sr))
            if start and first >= f.frames:   # seeking there fails inside libsndfile (psf_fseek)
                raise RecordError("bad_segment", f"{name}: segment starts at {start} s, at or past the end of "
                                  f"the file ({f.frames / sr:.3f} s); fix the manifest's start")
            frames = -1 if end is None else max(0, int(round(end * sr)) - first)
            f.seek(first)
            data = f.read(frames, dtype="float32", always_2d=True)
    except (sf.LibsndfileError, RuntimeError, OSError, ValueError) as e:
        raise RecordError("undecodable_audio", f"{name}: {e}") from None
    if not np.isfinite(data).all():
        bad = int(data.size - np.isfinite(data).sum())
        raise RecordError("nan_audio", f"{name}: {bad} of {data.size} samples are NaN or infinite")
    mono = to_mono(data)
    if sr != SAMPLE_RATE and mono.size:
        mono = soxr.resample(mono, sr, SAMPLE_RATE, quality="HQ").astype(np.float32)
    return np.ascontiguousarray(mono)


def peak_normalise(wave: np.ndarray, dbfs: float = PEAK_DBFS) -> np.ndarray:
    """Scale so the peak sits at `dbfs` (the codec was trained on peak-normalised audio)."""
    peak = float(np.abs(wave).max()) if wave.size else 0.0
    return wave if peak == 0 else (wave * (10 ** (dbfs / 20) / peak)).astype(np.float32)


def _unencodable(value) -> str | None:
    """The first string inside `value` that is not valid Unicode (undecodable bytes ride in as
    surrogates, as do JSON escapes of lone surrogates), else None."""
    if isinstance(value, str):
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            return value
        return None
    items = value.values() if isinstance(value, dict) else value if isinstance(value, list) else ()
    return next((bad for v in items if (bad := _unencodable(v)) is not None), None)


def _is_number(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


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
                preview = raw[:2000].decode("utf-8", "replace")
                try:
                    # surrogateescape: bytes that are not UTF-8 survive to be judged field by field
                    obj = json.loads(raw.decode("utf-8", "surrogateescape"))
                    if not isinstance(obj, dict):
                        raise ValueError("not a JSON object")
                except ValueError as e:
                    yield Reject(loc, "bad_json", f"{self.path} line {n}: {e}", preview)
                    continue
                got = self._clip(obj)
                if isinstance(got, tuple):
                    yield Reject(loc, got[0], f"{self.path} line {n}: {got[1]}", preview)
                else:
                    yield got

    def _clip(self, obj: dict) -> Record | tuple[str, str]:
        """The record of one manifest object, or (reason, detail) when a field cannot be taken."""
        a = self.a
        audio = obj.get(a.audio_field)
        if not isinstance(audio, str) or not audio or "\x00" in audio:
            return "no_audio", f"no file name in {a.audio_field!r}"
        text = obj.get(self.text_field)
        if text is not None and not isinstance(text, str):
            return "bad_transcript", f"{self.text_field!r} is a {type(text).__name__}, not text"
        if text is not None and _unencodable(text) is not None:
            return "bad_transcript_encoding", f"{self.text_field!r} is not UTF-8 text: {text[:80]!r}"
        translation = obj.get(a.translation_field) if a.translation_field else None
        if translation is not None and (not isinstance(translation, str) or _unencodable(translation) is not None):
            return "bad_translation", f"{a.translation_field!r} holds {translation!r:.80}, not UTF-8 text"
        target = obj.get(a.translation_language_field) if translation else None
        if target is not None and str(target) != a.translation_language:
            return ("translation_language_mismatch", f"a translation into {target!r}; this source's "
                    f"translation_language is {a.translation_language!r} (one target language per source: "
                    f"translation pairs do not name it)")
        scalars = [f for f in (self.id_field, a.recording_field, a.speaker_field, a.language_field) if f]
        for field in scalars:
            v = obj.get(field)
            if v is not None and (isinstance(v, bool) or not isinstance(v, (str, int))):
                return "bad_field", f"{field!r} is {v!r}; give a string or an integer"
        kept = [a.audio_field, *scalars, *self.metadata_fields]
        if (bad := next((k for k in kept if _unencodable(obj.get(k)) is not None), None)) is not None:
            return "bad_json", f"{bad!r} holds text that is not UTF-8 ({_unencodable(obj[bad])[:80]!r})"
        order = obj.get(a.order_field)
        if order is None:
            order = 0
        elif _is_number(order) and float(order).is_integer():
            order = int(order)
        else:
            return "bad_order", f"{a.order_field!r} is {order!r}; give the clip's position as an integer"
        start, end = obj.get(a.start_field), obj.get(a.end_field)
        for field, v in ((a.start_field, start), (a.end_field, end)):
            if v is not None and (not _is_number(v) or v < 0):
                return "bad_segment", f"{field!r} is {v!r}; give seconds as a number >= 0"
        if end is not None and end <= (start or 0):
            return "bad_segment", f"segment ends at {end} s, not after its start {start or 0} s"
        rid = str(obj[self.id_field]) if self.id_field and obj.get(self.id_field) is not None else \
            Path(audio).stem + (f"@{start}" if start is not None else "")
        meta = {k: obj[k] for k in self.metadata_fields if k in obj}
        meta.update({"file": audio, "recording": str(obj.get(a.recording_field) or rid), "order": order,
                     "start": start, "end": end, "speaker": obj.get(a.speaker_field),
                     "language": obj.get(a.language_field)})
        if translation and translation.strip():   # only then: other sources' metadata stays as it was
            meta.update({"translation": translation, "translation_language": a.translation_language})
        return Record(id=rid, source=self.source, text=text or "", meta=meta)


class AudioCheck(Step):
    """Open (inside the input tree only), decode, resample and check one clip; keeps the 24 kHz PCM in
    `record.payload["audio"]`. `base` is the manifest's folder, `allow_roots` the recipe's `input.allow_roots`."""
    name = "audio_check"

    def __init__(self, *, settings, base: Path, allow_roots: list[Path] = (), **kw):
        super().__init__(**kw)
        self.a, self.base = settings, base
        self.tree = InputTree(base, allow_roots)

    def process(self, record: Record) -> Record:
        m = record.meta
        try:
            clip = self.tree.open_name(m["file"], self.base)
        except (FileNotFoundError, NotADirectoryError):
            raise RecordError("undecodable_audio", f"{m['file']}: no such file next to the manifest") from None
        if isinstance(clip, Refusal):
            raise RecordError(clip.reason, clip.detail)
        with clip:
            wave = load_clip(clip, m.get("start"), m.get("end"), name=m["file"])
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
        record.payload["audio"] = wave
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
        rec = Recording.from_bytes(flac_bytes(r.payload["audio"]), recording_id=r.id)
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
