"""The IBQ image encoder: seeded and checkpoint loading, argmax codes, precision contract, layouts."""
from __future__ import annotations

import json

import numpy as np
import pytest
import torch
import yaml
from PIL import Image

from curation.errors import InputError
from curation.steps.codecs import load_codec, open_checkpoint
from curation.steps.image.codec import IBQEncoder, layout, to_pixels
from curation.steps.image.resize import target_size
from tests.checkpoints import ibq_state, write_ibq
from tests.conftest import REPO, VOCAB

CONFIG = yaml.safe_load((REPO / "tokenizers" / "curate-demo-ibq.yaml").read_text())


def picture(seed: int, size=(96, 64)) -> Image.Image:
    rng = np.random.default_rng(seed)
    return Image.fromarray(rng.integers(0, 256, (6, 8, 3), dtype=np.uint8)).resize(size, Image.BICUBIC)


@pytest.fixture(scope="module")
def encoder():
    return IBQEncoder.seeded(CONFIG, seed=CONFIG["seed"])


@pytest.mark.slow
def test_codes_are_deterministic_argmax_over_the_codebook(encoder):
    pixels = torch.stack([to_pixels(picture(1), (96, 64)), to_pixels(picture(2), (96, 64))])
    codes = encoder.encode(pixels)
    assert codes.shape == (2, 4, 6) and codes.dtype == torch.int64
    assert 0 <= int(codes.min()) and int(codes.max()) < CONFIG["n_embed"]
    again = IBQEncoder.seeded(CONFIG, seed=CONFIG["seed"]).encode(pixels)
    assert torch.equal(codes, again)
    with torch.no_grad():  # the same choice computed independently, in float64
        z = encoder.quant_conv(encoder.encoder(pixels)).double().permute(0, 2, 3, 1)
        scores = z @ encoder.quantize.embedding.weight.double().T
    assert torch.equal(scores.argmax(-1), codes)


def test_precision_contract_and_sizes(encoder):
    with pytest.raises(ValueError, match="float32"):
        encoder.encode(torch.zeros(1, 3, 32, 32, dtype=torch.bfloat16))
    with pytest.raises(ValueError, match="multiple of 16"):
        encoder.encode(torch.zeros(1, 3, 40, 32))
    w, h = target_size(1000, 600, 256 * 256)
    assert w % 16 == h % 16 == 0 and abs(w * h - 256 * 256) / (256 * 256) < 0.1 and abs(w / h - 1000 / 600) < 0.1


@pytest.mark.parametrize("weights, configs", [("model.ckpt", ("config.yaml",)),
                                              ("model.safetensors", ("config.json",)),
                                              ("model.safetensors", ("config.yaml", "config.json"))])
@pytest.mark.slow
def test_published_layout_loads_and_encodes_like_the_model(encoder, tmp_path, weights, configs):
    folder = write_ibq(tmp_path / "Emu3.5-VisionTokenizer", encoder, weights=weights, configs=configs)
    ckpt = open_checkpoint(folder, IBQEncoder)
    assert (ckpt.weights_file, ckpt.config_files) == (weights, list(configs))
    assert ckpt.used == len(encoder.state_dict()) and ckpt.skipped == 5      # the decoder half: present, unused
    pixels = torch.stack([to_pixels(picture(3), (64, 64)), to_pixels(picture(4), (64, 64))])
    assert torch.equal(ckpt.model.encode(pixels), encoder.encode(pixels))
    cached = load_codec(folder, IBQEncoder)
    assert cached is load_codec(folder, IBQEncoder) and torch.equal(cached.encode(pixels), encoder.encode(pixels))


def test_config_nested_under_model_params_and_a_weights_file_path(encoder, tmp_path):
    folder = write_ibq(tmp_path / "ibq", encoder)
    (folder / "config.yaml").write_text(yaml.safe_dump({"model": {"params": yaml.safe_load(
        (folder / "config.yaml").read_text())}}))
    pixels = to_pixels(picture(5), (48, 32))[None]
    assert torch.equal(open_checkpoint(folder / "model.ckpt", IBQEncoder).model.encode(pixels), encoder.encode(pixels))


def test_bad_checkpoints_are_refused_naming_the_tensor(encoder, tmp_path):
    def refused(state, match, **kw):
        folder = write_ibq(tmp_path / f"case{len(list(tmp_path.iterdir()))}", encoder, state=state, **kw)
        with pytest.raises(InputError, match=match):
            open_checkpoint(folder, IBQEncoder)

    state = ibq_state(encoder)
    del state["encoder.down.2.block.0.nin_shortcut.weight"]
    refused(state, r"missing tensor encoder\.down\.2\.block\.0\.nin_shortcut\.weight \(expected shape \(64, 32, 1, 1\)\)")
    state = ibq_state(encoder)
    state["quantize.embedding.weight"] = torch.zeros(8192, 64)
    refused(state, r"misshapen tensor quantize\.embedding\.weight: shape \(8192, 64\) in the file, \(4096, 64\) "
                   r"expected by config\.yaml")
    state = ibq_state(encoder)
    state["encoder.down.4.attn.1.q.weight"] = torch.zeros(128, 128, 1, 1)
    refused(state, r"unexpected tensor encoder\.down\.4\.attn\.1\.q\.weight \(shape \(128, 128, 1, 1\)\)")
    state = ibq_state(encoder)
    state["loss.discriminator.main.0.weight"] = torch.zeros(1)  # an unknown part: not the published layout
    refused(state, r"unexpected tensor loss\.discriminator")
    state = ibq_state(encoder)
    state["quant_conv.weight"] = state["quant_conv.weight"].to(torch.bfloat16)
    refused(state, r"quant_conv\.weight is stored in half precision", weights="model.safetensors")
    state = {**ibq_state(encoder), "encoder.conv_in.weight": torch.zeros(1)}
    del state["quant_conv.bias"]
    refused(state, r"2 problem\(s\)(.|\n)*misshapen tensor encoder\.conv_in\.weight(.|\n)*missing tensor quant_conv\.bias")

    folder = write_ibq(tmp_path / "pickled", encoder)
    torch.save({"state_dict": ibq_state(encoder), "extra": Image.new("RGB", (1, 1))}, folder / "model.ckpt")
    with pytest.raises(InputError, match="weights-only"):   # a pickled object is refused, not unpickled
        open_checkpoint(folder, IBQEncoder)


def test_bad_folders_and_configs_are_refused(encoder, tmp_path):
    folder = write_ibq(tmp_path / "both", encoder, configs=("config.yaml", "config.json"))
    raw = json.loads((folder / "config.json").read_text())
    (folder / "config.json").write_text(json.dumps({**raw, "num_res_blocks": 4}))
    with pytest.raises(InputError, match=r"config\.yaml and config\.json disagree on num_res_blocks \(1 vs 4\)"):
        open_checkpoint(folder, IBQEncoder)
    (folder / "config.json").write_text(json.dumps({**raw, "model_type": "Emu3VisionVQ"}))
    with pytest.raises(InputError, match="not Emu3p5VisionVQ"):
        open_checkpoint(folder, IBQEncoder)
    (folder / "config.json").unlink()
    (folder / "model.ckpt").unlink()
    with pytest.raises(InputError, match=r"no weights file \(model\.safetensors or model\.ckpt\)"):
        open_checkpoint(folder, IBQEncoder)
    with pytest.raises(InputError, match="a codec yaml needs `seed`"):   # the published config, not its folder
        load_codec(folder / "config.yaml", IBQEncoder)
    with pytest.raises(InputError, match="no such file or folder"):
        load_codec(tmp_path / "nowhere", IBQEncoder)


@pytest.mark.parametrize("end_of_row, eor_count", [("between", 3), ("after_each", 4)])
def test_sequence_layouts(tmp_path, end_of_row, eor_count):
    from curation.core.vocab import Vocabulary
    spec = yaml.safe_load(VOCAB.read_text())
    spec["text_tokenizer"] = str((VOCAB.parent / spec["text_tokenizer"]).resolve())
    spec["image_layout"] = {"end_of_row": end_of_row, "end_of_frame": end_of_row == "after_each"}
    (tmp_path / "v.yaml").write_text(yaml.safe_dump(spec))
    vocab = Vocabulary.load(tmp_path / "v.yaml")
    codes = np.arange(4 * 5).reshape(4, 5)
    seq = layout(codes, vocab).tolist()
    assert seq[0] == vocab.marker("image_start") and seq[-1] == vocab.marker("image_end")
    assert seq.count(vocab.marker("end_of_row")) == eor_count
    assert (vocab.marker("end_of_frame") in seq) == (end_of_row == "after_each")
    size = seq[1:seq.index(vocab.marker("image_size_end"))]
    assert vocab.tokenizer.decode(size).replace(" ", "") == "4*5"
    image_ids = [t for t in seq if t in vocab.block("image")]
    assert image_ids == [vocab.block("image").start + c for c in range(20)]
