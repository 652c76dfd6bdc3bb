"""The one codec loader: seeded configs and checkpoint folders for both families, cached per process
while the files stay the same, refused loudly otherwise."""
from __future__ import annotations

import os

import pytest
import torch
import yaml

from curation.errors import InputError
from curation.steps.audio.codec import WavTokenizerEncoder
from curation.steps.codecs import load_codec
from curation.steps.image.codec import IBQEncoder
from tests.checkpoints import write_ibq, write_wavtokenizer
from tests.conftest import REPO

IBQ = REPO / "tokenizers" / "curate-demo-ibq.yaml"
WAV = REPO / "tokenizers" / "curate-demo-wavtokenizer.yaml"


def test_seeded_configs_of_both_families_are_loaded_once_per_process():
    image, audio = load_codec(IBQ, IBQEncoder), load_codec(str(WAV), WavTokenizerEncoder)
    assert isinstance(image, IBQEncoder) and isinstance(audio, WavTokenizerEncoder)
    assert load_codec(str(IBQ), IBQEncoder) is image and load_codec(WAV, WavTokenizerEncoder) is audio
    seed = yaml.safe_load(IBQ.read_text())["seed"]
    assert torch.equal(image.quantize.embedding.weight,
                       IBQEncoder.seeded(yaml.safe_load(IBQ.read_text()), seed).quantize.embedding.weight)
    with pytest.raises(InputError, match=r"curate-demo-ibq\.yaml is not an audio codec configuration \(no n_codes\)"):
        load_codec(IBQ, WavTokenizerEncoder)


def test_a_checkpoint_replaced_in_place_is_loaded_again(tmp_path):
    first = IBQEncoder.seeded(yaml.safe_load(IBQ.read_text()), seed=1)
    folder = write_ibq(tmp_path / "ibq", first)
    a = load_codec(folder, IBQEncoder)
    assert load_codec(folder, IBQEncoder) is a
    second = IBQEncoder.seeded(yaml.safe_load(IBQ.read_text()), seed=2)
    write_ibq(folder, second)
    os.utime(folder / "model.ckpt", ns=(1, 1))            # a new size or mtime: a new key
    b = load_codec(folder, IBQEncoder)
    assert b is not a and torch.equal(b.quant_conv.weight, second.quant_conv.weight)


@pytest.mark.slow
def test_a_folder_of_the_other_family_is_refused(tmp_path):
    audio = WavTokenizerEncoder.seeded(yaml.safe_load(WAV.read_text()), seed=0)
    folder = write_wavtokenizer(tmp_path / "wt", audio)
    with pytest.raises(InputError, match="image codec .*no weights file"):
        load_codec(folder, IBQEncoder)
    image = IBQEncoder.seeded(yaml.safe_load(IBQ.read_text()), seed=0)
    folder = write_ibq(tmp_path / "ibq", image)
    with pytest.raises(InputError, match=r"config\.yaml: no model\.init_args\.feature_extractor"):
        load_codec(folder, WavTokenizerEncoder)
