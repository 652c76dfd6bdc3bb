"""Audio ingest: every manifest line that cannot become a clip is quarantined with its own reason (never a
traceback), clips are opened only inside the manifest's folder or an allowed root, NaN/inf samples are
`nan_audio`, and the downmix does not cancel channels in antiphase."""
from __future__ import annotations

import json
import os

import numpy as np
import pytest
import soundfile as sf

from curation.core.record import QuarantineSink, Record
from curation.errors import RecordError
from curation.steps.audio.declaration import Audio
from curation.steps.audio.ingest import AudioCheck, AudioManifestReader, load_clip, to_mono
from tests.conftest import REPO

SPEECH = REPO / "recipes" / "audio" / "speech"


def _read(tmp_path, lines: list[bytes]):
    path = tmp_path / "m.jsonl"
    path.write_bytes(b"\n".join(lines) + b"\n")
    reader = AudioManifestReader(path, settings=Audio(), text_field="text", id_field=None,
                                 metadata_fields=["speaker"], shard_label="00000", source="s", sink=QuarantineSink())
    records = list(reader.run())
    return records, dict(reader.stats.quarantined), reader


def test_every_bad_field_is_quarantined_with_its_reason(tmp_path):
    j = lambda **kw: json.dumps({"audio": "a.ogg", **kw}).encode()  # noqa: E731
    lines = [j(order=3, start=0.5, end=2), j(audio="b.ogg", order=3.0), j(audio="c.ogg", order=None),
             j(order="first"), j(order=1.5), j(order=True), j(order=[1]), j(order="3"),
             j(start="a"), j(start=-1), j(start=2, end=1), j(start=1, end=1), j(end=0), j(start=True),
             b'{"audio": "a.ogg", "start": NaN}', b'{"audio": "a.ogg", "end": Infinity}',
             b'{"audio": "a.ogg", "text": "caf\xe9"}',                       # latin-1 bytes in the transcript
             b'{"audio": "a.ogg", "text": "lone \\ud800 surrogate"}',          # valid JSON, not valid text
             b'{"audio": "a.ogg", "speaker": "caf\xe9"}',                    # latin-1 bytes elsewhere
             j(text=["a", "list"]), j(speaker=["x"]), j(recording={"a": 1}), j(audio=""), j(audio=7),
             b"[1, 2]", b"{not json"]
    records, quarantined, reader = _read(tmp_path, lines)
    assert [(r.id, r.meta["order"], r.meta["start"], r.meta["end"]) for r in records] == [
        ("a@0.5", 3, 0.5, 2), ("b", 3, None, None), ("c", 0, None, None)]
    assert quarantined == {"bad_order": 5, "bad_segment": 8, "bad_transcript_encoding": 2, "bad_json": 3,
                           "bad_transcript": 1, "bad_field": 2, "no_audio": 2}
    assert reader.stats.records_in == len(lines) == len(records) + sum(quarantined.values())
    details = [q["detail"] for q in reader.sink.entries]
    assert any("'order' is 'first'; give the clip's position as an integer" in d for d in details)
    assert any("segment ends at 1 s, not after its start 2 s" in d for d in details)


def test_folder_transcripts_that_are_not_utf8_are_quarantined_not_mended(tmp_path):
    """`audio_folder` keeps a sidecar's bytes in clips.jsonl; the reader quarantines them like a caption."""
    line = json.dumps({"audio": "files/a.ogg", "id": "a", "text": "\udce9t\udce9"}, ensure_ascii=False)
    records, quarantined, _ = _read(tmp_path, [line.encode("utf-8", "surrogateescape")])
    assert (records, quarantined) == ([], {"bad_transcript_encoding": 1})


def _check(tmp_path, name: str, allow=()):
    check = AudioCheck(settings=Audio(), base=tmp_path / "m", allow_roots=allow, source="s", sink=QuarantineSink())
    record = Record(id="x", source="s", text="", meta={"file": name, "start": None, "end": None,
                                                       "recording": "x", "order": 0})
    kept = list(check.run([record]))
    return kept, dict(check.stats.quarantined)


def test_clip_paths_stay_in_the_manifest_folder(tmp_path):
    (tmp_path / "m").mkdir()
    (tmp_path / "shared").mkdir()
    clip = (SPEECH / "LJ001-0002.ogg").read_bytes()
    (tmp_path / "canary.ogg").write_bytes(clip)
    (tmp_path / "shared" / "ok.ogg").write_bytes(clip)
    (tmp_path / "m" / "link.ogg").symlink_to(tmp_path / "canary.ogg")
    os.link(tmp_path / "canary.ogg", tmp_path / "m" / "hard.ogg")
    (tmp_path / "m" / "in.ogg").write_bytes(clip)
    for name, reason in (("../canary.ogg", "path_outside_input"), ("/etc/passwd", "path_outside_input"),
                         (str(tmp_path / "canary.ogg"), "path_outside_input"), ("link.ogg", "link_outside_input"),
                         ("hard.ogg", "link_outside_input"), ("../shared/ok.ogg", "path_outside_input"),
                         ("missing.ogg", "undecodable_audio"), ("in.ogg/x", "undecodable_audio")):
        assert _check(tmp_path, name) == ([], {reason: 1}), name
    assert len(_check(tmp_path, "in.ogg")[0]) == 1
    for name in ("../shared/ok.ogg", str(tmp_path / "shared" / "ok.ogg")):
        assert len(_check(tmp_path, name, [tmp_path / "shared"])[0]) == 1, name


@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
def test_nan_and_inf_samples_are_nan_audio_not_silent(tmp_path, bad):
    wave = np.zeros((24000, 1), np.float32)
    wave[100] = bad
    sf.write(tmp_path / "n.wav", wave, 24000, subtype="FLOAT")
    with pytest.raises(RecordError) as err:
        load_clip(tmp_path / "n.wav")
    assert err.value.reason == "nan_audio" and "1 of 24000 samples" in err.value.detail


def _speech(seconds: float = 2.0) -> np.ndarray:
    data, sr = sf.read(SPEECH / "LJ001-0001.ogg", dtype="float32")
    return data[: int(seconds * sr)]


def test_antiphase_stereo_keeps_the_louder_channel(tmp_path):
    x = _speech()
    for right, louder in ((-x, 0), (-1.2 * x, 1), (-0.9 * x + 0.01 * np.sin(np.arange(x.size)), 0)):
        stereo = np.stack([x, right.astype(np.float32)], axis=1)
        assert np.array_equal(to_mono(stereo), stereo[:, louder])
    sf.write(tmp_path / "m.wav", np.stack([x, -x], axis=1), 22050, subtype="FLOAT")
    check = AudioCheck(settings=Audio(), base=tmp_path, source="s", sink=QuarantineSink())
    [kept] = check.run([Record(id="m", source="s", text="", meta={"file": "m.wav", "recording": "m", "order": 0})])
    assert kept.meta["seconds"] == pytest.approx(2.0, abs=0.01)          # not `silent`


def test_normal_stereo_is_the_channel_mean_bit_for_bit():
    x = _speech()
    rng = np.random.default_rng(0)
    y = np.roll(x, 40) * 0.7 + rng.normal(0, 0.01, x.size).astype(np.float32)   # delayed, quieter, noisy
    for stereo in (np.stack([x, x], 1), np.stack([x, y], 1), np.stack([x, np.zeros_like(x)], 1),
                   np.stack([x, rng.permutation(x)], 1)):
        stereo = stereo.astype(np.float32)
        assert np.array_equal(to_mono(stereo), stereo.mean(axis=1, dtype=np.float32))
    mono = x[:, None]
    assert np.array_equal(to_mono(mono), x)


@pytest.mark.parametrize("ext", ["wav", "flac", "ogg"])
def test_a_clip_start_past_the_end_of_its_file_is_a_segment_reason(tmp_path, ext):
    """Issue 22.11: it was `undecodable_audio: Internal psf_fseek() failed`."""
    t = np.arange(24000, dtype=np.float32) / 24000
    sf.write(tmp_path / f"c.{ext}", (0.3 * np.sin(2 * np.pi * 440 * t))[:, None], 24000)
    for start in (5.0, 1.0):
        with pytest.raises(RecordError) as err:
            load_clip(tmp_path / f"c.{ext}", start, None)
        assert err.value.reason == "bad_segment" and "past the end of the file (1.000 s)" in err.value.detail
    assert load_clip(tmp_path / f"c.{ext}", 0.5, None).size == 12000   # a start inside the file still reads
