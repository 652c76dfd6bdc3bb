"""`curate codec check`: a checkpoint folder in the published layout is loaded, checked and hashed; a bad
one exits 1 (a failed command, `curation.commands.console`) naming the tensor."""
from __future__ import annotations

import hashlib
import re

import numpy as np
import pytest
import torch
import yaml

from curation.commands.cli import main
from curation.commands.codec import (
    PROBE_SAMPLES,
    PROBE_SIDE,
    encode_probe,
    probe_clip,
    probe_image,
)
from curation.steps.audio.codec import WavTokenizerEncoder
from curation.steps.image.codec import IBQEncoder
from tests.checkpoints import (
    ibq_state,
    wavtokenizer_state,
    write_ibq,
    write_wavtokenizer,
)
from tests.conftest import REPO

IBQ = REPO / "tokenizers" / "curate-demo-ibq.yaml"
WAV = REPO / "tokenizers" / "curate-demo-wavtokenizer.yaml"


def _fields(text: str) -> dict:
    return {m[1]: m[2].strip() for m in re.finditer(r"^([a-z0-9 ]+):\s+(.*)$", text, re.M)}


def _sha(codes) -> str:
    return hashlib.sha256(np.asarray(codes).astype("<i4").tobytes()).hexdigest()


def test_probes_are_fixed():
    img, again = probe_image(), probe_image()
    assert img.size == (PROBE_SIDE, PROBE_SIDE) and img.mode == "RGB" and img.tobytes() == again.tobytes()
    clip = probe_clip()
    assert clip.dtype == np.float32 and clip.shape == (PROBE_SAMPLES,) and np.array_equal(clip, probe_clip())
    assert 0.2 < np.abs(clip).max() < 0.5 and np.array_equal(clip * 2 ** 18, np.round(clip * 2 ** 18))


@pytest.mark.slow
def test_image_folder_prints_counts_and_the_hash_of_the_probe_codes(tmp_path, capsys):
    model = IBQEncoder.seeded(yaml.safe_load(IBQ.read_text()), seed=3)
    folder = write_ibq(tmp_path / "Emu3.5-VisionTokenizer", model, weights="model.safetensors",
                       configs=("config.yaml", "config.json"))
    assert main(["codec", "check", str(folder)]) == 0          # --kind inferred from the configuration
    f = _fields(capsys.readouterr().out)
    assert f["files"] == "config.yaml, config.json, model.safetensors"
    assert f["weights sha256"] == hashlib.sha256((folder / "model.safetensors").read_bytes()).hexdigest()
    assert f["tensors"] == f"{len(model.state_dict())} loaded and checked, 5 present but unused"
    assert f["parameters"].startswith(f"{sum(t.numel() for t in model.state_dict().values()):,} ")
    assert f["codebook"] == "4,096 codes x 64 dimensions"
    assert f["probe"].startswith("128x128 test image -> codes 1x8x8")
    assert f["codes sha256"] == _sha(encode_probe(model, "image"))
    assert main(["codec", "check", str(IBQ)]) == 0                 # the seeded yaml: other weights, other hash
    assert _fields(capsys.readouterr().out)["codes sha256"] != f["codes sha256"]


@pytest.mark.slow
def test_audio_folder_hash_matches_the_seeded_codec_it_was_saved_from(tmp_path, capsys):
    model = WavTokenizerEncoder.seeded(yaml.safe_load(WAV.read_text()), seed=0)
    folder = write_wavtokenizer(tmp_path / "wt", model, name="wavtokenizer_large_unify_600_24k.ckpt")
    assert main(["codec", "check", str(folder), "--kind", "audio"]) == 0
    from_folder = _fields(capsys.readouterr().out)
    assert main(["codec", "check", str(WAV)]) == 0
    from_yaml = _fields(capsys.readouterr().out)
    assert from_folder["codes sha256"] == from_yaml["codes sha256"] == _sha(model.encode(
        torch.from_numpy(probe_clip())[None]))
    assert from_folder["probe"].startswith("2 s test clip at 24 kHz -> codes 1x80")
    assert from_folder["codebook"] == "4,096 codes x 64 dimensions"
    assert from_yaml["weights"].startswith("seeded random")


@pytest.mark.slow
def test_bad_folders_exit_1_naming_the_tensor(tmp_path, capsys):
    model = IBQEncoder.seeded(yaml.safe_load(IBQ.read_text()), seed=0)
    state = ibq_state(model)
    state["encoder.mid.attn_1.proj_out.weight"] = torch.zeros(128, 128, 3, 3)
    assert main(["codec", "check", str(write_ibq(tmp_path / "ibq", model, state=state))]) == 1
    err = capsys.readouterr().err
    assert ("misshapen tensor encoder.mid.attn_1.proj_out.weight: shape (128, 128, 3, 3) in the file, "
            "(128, 128, 1, 1) expected by config.yaml") in err

    audio = WavTokenizerEncoder.seeded(yaml.safe_load(WAV.read_text()), seed=0)
    state = wavtokenizer_state(audio)
    del state["feature_extractor.encodec.encoder.model.15.conv.conv.weight_v"]
    assert main(["codec", "check", str(write_wavtokenizer(tmp_path / "wt", audio, state=state))]) == 1
    assert "missing tensor feature_extractor.encodec.encoder.model.15.conv.conv.weight_v" in capsys.readouterr().err

    (tmp_path / "empty").mkdir()
    assert main(["codec", "check", str(tmp_path / "empty")]) == 1
    assert "give --kind image or --kind audio" in capsys.readouterr().err
    assert main(["codec", "check", str(tmp_path / "empty"), "--kind", "image"]) == 1
    assert "no weights file (model.safetensors or model.ckpt)" in capsys.readouterr().err
