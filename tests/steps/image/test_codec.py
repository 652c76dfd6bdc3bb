"""The IBQ image encoder: seeded and checkpoint loading, argmax codes, precision contract, layouts."""
from __future__ import annotations

import numpy as np
import pytest
import torch
import yaml
from PIL import Image

from curation.errors import InputError
from curation.steps.image.codec import IBQEncoder, layout, target_size, to_pixels
from tests.conftest import REPO, VOCAB

CONFIG = yaml.safe_load((REPO / "tokenizers" / "curate-demo-ibq.yaml").read_text())


def picture(seed: int, size=(96, 64)) -> Image.Image:
    rng = np.random.default_rng(seed)
    return Image.fromarray(rng.integers(0, 256, (6, 8, 3), dtype=np.uint8)).resize(size, Image.BICUBIC)


@pytest.fixture(scope="module")
def encoder():
    return IBQEncoder.seeded(CONFIG, seed=CONFIG["seed"])


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


def test_checkpoint_loads_weights_only(encoder, tmp_path):
    state = {f"{k}": v for k, v in encoder.state_dict().items()}
    state["decoder.conv_in.weight"] = torch.zeros(1)  # parts the encoder does not need are ignored
    folder = tmp_path / "ibq"
    folder.mkdir()
    (folder / "config.yaml").write_text(yaml.safe_dump({"model": {"params": {
        "ddconfig": CONFIG["ddconfig"], "n_embed": CONFIG["n_embed"], "embed_dim": CONFIG["embed_dim"]}}}))
    torch.save({"state_dict": state}, folder / "model.ckpt")
    loaded = IBQEncoder.from_checkpoint(folder)
    pixels = to_pixels(picture(3), (64, 64))[None]
    assert torch.equal(loaded.encode(pixels), encoder.encode(pixels))

    torch.save({"state_dict": state, "extra": Image.new("RGB", (1, 1))}, folder / "model.ckpt")
    with pytest.raises(InputError, match="weights-only"):   # a pickled object is refused, not unpickled
        IBQEncoder.from_checkpoint(folder)
    del state["quant_conv.weight"]
    torch.save({"state_dict": state}, folder / "model.ckpt")
    with pytest.raises(InputError, match="quant_conv.weight"):
        IBQEncoder.from_checkpoint(folder)


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
