"""Build the audio demo's clips and manifests from public-domain recordings in ../shared/data/audio
(see its SOURCES.md and manifest.csv), re-encoded as Ogg Vorbis so the repo stays small:

    speech/       LJ Speech LJ001-0001..0004 and 0006..0009 (one reader, consecutive sentences of one
                  chapter: two runs of four clips, 0005 left out) with their transcripts; plus checks:
                  LJ001-0010 with another clip's transcript (too short for its 8.8 s: mismatch), 2 s of
                  silence, and a manifest line naming a file that does not exist
    unpaired/     no transcripts: 12 s of Brahms' Hungarian Dance no. 5 (Musopen / US Army Strings, public
                  domain), 10 s of humpback whale song (US National Park Service, public domain), and
                  LJ001-0002 resampled to 16 kHz at -6 dB (a near duplicate of a speech clip)

Run: python recipes/audio/build.py (needs soundfile and soxr; the outputs are committed).
"""
from __future__ import annotations

import csv
import json
from pathlib import Path

import numpy as np
import soundfile as sf
import soxr

HERE = Path(__file__).resolve().parent
DATA = HERE.parents[2] / "shared" / "data" / "audio"
MUSIC = "music/librosa_Hungarian_Dance_number_5_-_Allegro_in_F_sharp_minor_(string_orchestra).ogg"
WHALE = "other_sounds/librosa_glacier-bay-humpback.ogg"


def read(rel: str, seconds: float | None = None) -> tuple[np.ndarray, int]:
    data, sr = sf.read(DATA / rel, dtype="float32", always_2d=True)
    mono = data.mean(axis=1)
    return (mono[:int(seconds * sr)] if seconds else mono), sr


def write_ogg(path: Path, wave: np.ndarray, sr: int) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    sf.write(path, wave, sr, format="OGG", subtype="VORBIS")


def main() -> None:
    transcripts = {Path(r["file"]).stem: r["transcript"] for r in csv.DictReader(open(DATA / "manifest.csv"))}
    lines = []
    for n in (1, 2, 3, 4, 6, 7, 8, 9, 10):
        stem = f"LJ001-{n:04d}"
        wave, sr = read(f"speech_ljspeech/{stem}.flac")
        write_ogg(HERE / "speech" / f"{stem}.ogg", wave, sr)
        text = transcripts[stem] if n != 10 else transcripts["LJ001-0002"]  # a transcript that does not fit
        lines.append({"audio": f"{stem}.ogg", "text": text, "recording": "LJ001", "order": n, "speaker": "LJ",
                      "language": "en"})
    sf.write(HERE / "speech" / "silence.wav", np.zeros(2 * 24000, dtype=np.float32), 24000, subtype="PCM_16")
    lines.append({"audio": "silence.wav", "text": "", "recording": "room-tone", "order": 0})
    lines.append({"audio": "LJ001-0099.ogg", "text": "a clip that was never downloaded", "recording": "LJ001",
                  "order": 99})
    (HERE / "speech" / "speech.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))

    music, sr = read(MUSIC, 12.0)
    write_ogg(HERE / "unpaired" / "hungarian_dance_5.ogg", music, sr)
    whale, sr = read(WHALE, 10.0)
    write_ogg(HERE / "unpaired" / "humpback.ogg", whale, sr)
    lj, sr = read("speech_ljspeech/LJ001-0002.flac")
    copy = soxr.resample(lj, sr, 16000) * 10 ** (-6 / 20)
    write_ogg(HERE / "unpaired" / "lj0002_16k.ogg", copy.astype(np.float32), 16000)
    lines = [{"audio": f, "recording": Path(f).stem} for f in ("hungarian_dance_5.ogg", "humpback.ogg",
                                                                 "lj0002_16k.ogg")]
    (HERE / "unpaired" / "unpaired.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))


if __name__ == "__main__":
    main()
