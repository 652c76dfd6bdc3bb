"""Canary files planted outside the input tree never reach processed data or shards: recipes with image and
audio folders, clip manifests and WebDataset tars whose links, hard links and paths point at the canaries
run end to end on the local executor; every refused item is counted with its reason (acquisition outcomes,
or quarantine), and the processed Parquet and the decoded shards are searched for the canary."""
from __future__ import annotations

import io
import json
import os
import shutil
import tarfile
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest
import soundfile as sf

from tests.conftest import REPO, VOCAB

CANARY = "CANARY-7f3a planted outside the input tree"
SPEECH = REPO / "recipes" / "audio" / "speech"


def _processed_strings(out: Path, source: str) -> str:
    """Every id, text and metadata value of a source's processed Parquet, as one string."""
    rows = [r for f in sorted((out / "processed" / source).glob("*.parquet"))
            for r in pq.read_table(f, columns=["id", "text", "meta"]).to_pylist()]
    return "\n".join(f"{r['id']}\t{r['text']}\t{r['meta']}" for r in rows)


def _shard_text(out: Path, source: str) -> str:
    """The text tokens of every shard of a source, decoded."""
    from curation.core.vocab import Vocabulary
    from curation.shards import read_tokens
    vocab = Vocabulary.load(VOCAB)
    text = vocab.block("text")
    decoded = []
    for idx in sorted((out / "tokenized" / source).glob("*.idx")):
        tokens = read_tokens(idx.with_suffix("")).tolist()
        decoded.append(vocab.tokenizer.decode([t for t in tokens if t in text]))
    assert decoded, f"no shards for {source}"
    return "\n".join(decoded)


def _images() -> dict[str, tuple[bytes, str]]:
    with tarfile.open(REPO / "recipes" / "images" / "shards" / "captioned-00000.tar") as tar:
        return {k: (tar.extractfile(f"{k}.jpg").read(), tar.extractfile(f"{k}.txt").read().decode())
                for k in ("0000", "0001", "0003", "0004", "0005", "0006", "0007")}


def _member(tar, name: str, data: bytes | None = None, link: str = "", hard: bool = False) -> None:
    info = tarfile.TarInfo(name)
    if data is None:
        info.type, info.linkname = (tarfile.LNKTYPE if hard else tarfile.SYMTYPE), link
        tar.addfile(info)
    else:
        info.size = len(data)
        tar.addfile(info, io.BytesIO(data))


@pytest.mark.slow
def test_image_canaries_never_reach_processed_data_or_shards(tmp_path):
    from curation.commands.run import run
    img = _images()
    outside, photos = tmp_path / "outside", tmp_path / "photos"
    (outside / "dir").mkdir(parents=True)
    photos.mkdir()
    (outside / "canary.txt").write_text(CANARY)
    (outside / "canary.jpg").write_bytes(img["0003"][0])
    (outside / "dir" / "x.jpg").write_bytes(img["0003"][0])
    for name, key in (("p0", "0000"), ("p1", "0001"), ("p3", "0004"), ("p4", "0005")):
        (photos / f"{name}.jpg").write_bytes(img[key][0])
    (photos / "p0.txt").write_text(img["0000"][1])
    (photos / "p4.txt").write_text(img["0005"][1])
    (photos / "p1.txt").symlink_to(outside / "canary.txt")          # a symlinked sidecar caption
    (photos / "p2.jpg").symlink_to("../outside/canary.jpg")         # a symlinked image
    os.link(outside / "canary.txt", photos / "p3.txt")              # a hard-linked sidecar caption
    (photos / "more").symlink_to(outside / "dir")                   # a folder link out
    (tmp_path / "wds").mkdir()
    with tarfile.open(tmp_path / "wds" / "shard-00000.tar", "w") as tar:
        _member(tar, "a.jpg", img["0006"][0])
        _member(tar, "a.txt", img["0006"][1].encode())
        _member(tar, "b.jpg", link=str(outside / "canary.jpg"))     # a sample made only of links
        _member(tar, "b.txt", link=str(outside / "canary.txt"))
        _member(tar, "c.jpg", img["0007"][0])
        _member(tar, "c.txt", link="a.txt", hard=True)              # a hard link to an earlier member
        _member(tar, "d.jpg", link="../outside/canary.jpg", hard=True)
    (tmp_path / "r.yaml").write_text(f"""name: image-canaries
vocabulary: {VOCAB}
image_tokenizer: {REPO / "tokenizers" / "curate-demo-ibq.yaml"}
stages: [{{name: pretrain, seq_length: 1024}}]
sources:
  - name: photos
    modality: image
    license: CC0-1.0
    acquire: {{kind: image_folder, path: photos}}
    max_quarantine_share: 0.9       # most of its files link out of the folder, on purpose
    input: {{format: webdataset, paths: ["images-*.tar"]}}
    images: {{min_side: 64, area: 16384}}
  - name: wds
    modality: image
    license: CC0-1.0
    input: {{format: webdataset, paths: [wds/*.tar]}}
    images: {{min_side: 64, area: 16384}}
""")
    result = run(tmp_path / "r.yaml", tmp_path / "out", progress=False)
    acq = {(a["source"], a["outcome"], a["reason"]): a["items"] for a in result.rows["acquisition"]}
    assert acq == {("photos", "ok", None): 2, ("photos", "refused", "link_outside_input"): 4}
    refused = json.loads((tmp_path / "out" / "raw" / "photos" / "acquired.json").read_text())["refused"]
    assert sorted(r["path"] for r in refused) == ["more", "p1.jpg", "p2.jpg", "p3.jpg"]
    quarantine = {(q["source"], q["reason"]): q["records"] for q in result.rows["quarantine"]}
    assert quarantine == {("wds", "link_outside_input"): 2}
    assert {t["source"]: t["documents"] for t in result.rows["tokens"]} == {"photos": 2, "wds": 2}
    for source in ("photos", "wds"):
        assert CANARY not in _processed_strings(tmp_path / "out", source)
        assert "CANARY" not in _shard_text(tmp_path / "out", source)
        images = [r["image"] for f in (tmp_path / "out" / "processed" / source).glob("*.parquet")
                  for r in pq.read_table(f, columns=["image"]).to_pylist()]
        assert img["0003"][0] not in images and img["0001"][0] not in images   # the canary; p1's refused sample
    assert " ".join(img["0006"][1].split()[:3]) in _shard_text(tmp_path / "out", "wds")   # c's caption, via a.txt


def _antiphase(path: Path) -> None:
    data, sr = sf.read(SPEECH / "LJ001-0007.ogg", dtype="float32")
    sf.write(path, np.stack([data, -data], axis=1), sr, subtype="FLOAT")


@pytest.mark.slow
def test_audio_canaries_never_reach_processed_data_or_shards(tmp_path):
    """Also: a source with exactly one surviving clip (lhotse's bucketing needs two) runs through, and
    the antiphase stereo clip is kept, not `silent`."""
    from curation.commands.run import run
    from curation.steps.audio.fingerprint import pcm_hash
    from curation.steps.audio.ingest import load_clip
    texts = {json.loads(x)["audio"]: json.loads(x)["text"] for x in (SPEECH / "speech.jsonl").read_text().splitlines()}
    outside, rec, m, shared, m2 = (tmp_path / d for d in ("outside", "clips/rec", "m", "shared", "m2"))
    for d in (outside, rec, m, shared, m2):
        d.mkdir(parents=True)
    shutil.copyfile(SPEECH / "LJ001-0004.ogg", outside / "canary.ogg")
    (outside / "canary.txt").write_text(CANARY)
    canary_hash = pcm_hash(load_clip(outside / "canary.ogg"))[:16]
    # an audio folder: a good clip, a symlinked clip, a symlinked transcript, a hard-linked clip, a transcript
    # in latin-1, and a stereo clip in antiphase
    shutil.copyfile(SPEECH / "LJ001-0001.ogg", rec / "00.ogg")
    (rec / "00.txt").write_text(texts["LJ001-0001.ogg"])
    (rec / "01.ogg").symlink_to(outside / "canary.ogg")
    shutil.copyfile(SPEECH / "LJ001-0003.ogg", rec / "02.ogg")
    (rec / "02.txt").symlink_to(outside / "canary.txt")
    os.link(outside / "canary.ogg", rec / "03.ogg")
    shutil.copyfile(SPEECH / "LJ001-0006.ogg", rec / "04.ogg")
    (rec / "04.txt").write_bytes(texts["LJ001-0006.ogg"].encode().replace(b"e", b"\xe9"))
    _antiphase(tmp_path / "clips" / "antiphase.wav")
    # a clip manifest: one good clip among `../`, absolute and linked paths, a bad order, a bad segment, NaNs
    shutil.copyfile(SPEECH / "LJ001-0008.ogg", m / "one.ogg")
    (m / "link.ogg").symlink_to(outside / "canary.ogg")
    nan = np.zeros((24000, 1), np.float32)
    nan[10] = np.nan
    sf.write(m / "nan.wav", nan, 24000, subtype="FLOAT")
    lines = [{"id": "one", "audio": "one.ogg", "text": texts["LJ001-0008.ogg"]},
             {"id": "up", "audio": "../outside/canary.ogg", "text": CANARY},
             {"id": "passwd", "audio": "/etc/passwd"}, {"id": "abs", "audio": str(outside / "canary.ogg")},
             {"id": "link", "audio": "link.ogg"}, {"id": "order", "audio": "one.ogg", "order": "first"},
             {"id": "seg", "audio": "one.ogg", "start": "a"}, {"id": "nan", "audio": "nan.wav"}]
    (m / "clips.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))
    # a manifest reaching into a root the recipe allows
    shutil.copyfile(SPEECH / "LJ001-0009.ogg", shared / "two.ogg")
    (m2 / "clips.jsonl").write_text(json.dumps({"id": "two", "audio": "../shared/two.ogg"}) + "\n")
    (tmp_path / "r.yaml").write_text(f"""name: audio-canaries
vocabulary: {VOCAB}
audio_tokenizer: {REPO / 'tokenizers' / 'curate-demo-wavtokenizer.yaml'}
sources:
  - name: folder
    modality: audio
    license: public-domain
    optout: not_available
    acquire: {{kind: audio_folder, path: clips}}
    max_quarantine_share: 0.9       # most of its clips link out of the folder, on purpose
    input: {{format: audio, paths: [clips.jsonl], id_field: id}}
  - name: manifest
    modality: audio
    license: public-domain
    optout: not_available
    input: {{format: audio, paths: [m/clips.jsonl], id_field: id}}
    max_quarantine_share: 0.9       # 7 of its 8 lines are hostile or broken, on purpose
  - name: allowed
    modality: audio
    license: public-domain
    optout: not_available
    input: {{format: audio, paths: [m2/clips.jsonl], id_field: id, allow_roots: [shared]}}
""")
    result = run(tmp_path / "r.yaml", tmp_path / "out", progress=False)
    acq = {(a["source"], a["outcome"], a["reason"]): a["items"] for a in result.rows["acquisition"]}
    assert acq == {("folder", "ok", None): 3, ("folder", "refused", "link_outside_input"): 3}
    quarantine = {(q["source"], q["reason"]): q["records"] for q in result.rows["quarantine"]}
    assert quarantine == {("folder", "bad_transcript_encoding"): 1, ("manifest", "path_outside_input"): 3,
                          ("manifest", "link_outside_input"): 1, ("manifest", "bad_order"): 1,
                          ("manifest", "bad_segment"): 1, ("manifest", "nan_audio"): 1}
    audio = {r["source"]: r for r in result.rows["audio"]}
    assert {s: audio[s]["clips"] for s in audio} == {"folder": 2, "manifest": 1, "allowed": 1}
    assert audio["folder"]["audio_only"] == 1                       # the antiphase clip: kept, untranscribed
    out = tmp_path / "out"
    for source in ("folder", "manifest", "allowed"):
        assert "CANARY" not in _processed_strings(out, source) and "root:" not in _processed_strings(out, source)
        assert "CANARY" not in _shard_text(out, source)
        hashes = [r["content_hash"] for f in (out / "processed" / source).glob("*.parquet")
                  for r in pq.read_table(f, columns=["content_hash"]).to_pylist()]
        assert canary_hash not in hashes
    assert " ".join(texts["LJ001-0008.ogg"].split()[:3]) in _shard_text(out, "manifest")
