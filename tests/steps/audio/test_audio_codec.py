"""The WavTokenizer audio encoder: code counts, nearest-code choice, determinism, batching, checkpoints."""
from __future__ import annotations

import math

import numpy as np
import pytest
import torch
import yaml

from curation.errors import InputError
from curation.steps.audio.codec import (
    CODEBOOK_KEY,
    PREFIX,
    PUBLISHED,
    WavTokenizerEncoder,
    load_audio_codec,
)
from tests.conftest import REPO, VOCAB

CONFIG_PATH = REPO / "tokenizers" / "curate-demo-wavtokenizer.yaml"
CONFIG = yaml.safe_load(CONFIG_PATH.read_text())


def clip(seed: int, samples: int) -> torch.Tensor:
    """Tones with a wandering pitch plus noise, at a varying level: something like a voice, in [-1, 1]."""
    rng = np.random.default_rng(seed)
    t = np.arange(samples) / 24000
    pitch = 120 + 60 * np.sin(2 * np.pi * rng.uniform(0.5, 3) * t)
    tone = np.sin(2 * np.pi * np.cumsum(pitch) / 24000) + 0.5 * np.sin(4 * np.pi * np.cumsum(pitch) / 24000)
    level = 0.3 * (1.2 + np.sin(2 * np.pi * rng.uniform(1, 4) * t)) / 2.2
    return torch.from_numpy((level * tone / 1.5 + 0.02 * rng.standard_normal(samples)).astype(np.float32))


@pytest.fixture(scope="module", autouse=True)
def one_thread():
    """One intra-op thread: these small convolutions and LSTM steps gain nothing from more, and on a
    shared machine a second thread that waits on a busy core makes them tens of times slower."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.fixture(scope="module")
def encoder():
    return WavTokenizerEncoder.seeded(CONFIG, seed=CONFIG["seed"])


def published_state(model: WavTokenizerEncoder, form: str = "weight_g") -> dict:
    """The model's weights in the published Lightning layout: weight-normed convs as g and v (v scaled by
    a power of two, which the loader's normalisation takes out exactly), plus parts the encoder ignores."""
    names = {"weight_g": ("weight_g", "weight_v"),
             "parametrizations": ("parametrizations.weight.original0", "parametrizations.weight.original1")}[form]
    state = {}
    for key, value in model.state_dict().items():
        if key == "codebook":
            state[CODEBOOK_KEY] = value.clone()
        elif key.endswith("conv.conv.weight"):
            base = PREFIX + key[:-len(".weight")]
            state[f"{base}.{names[0]}"] = value.flatten(1).norm(dim=1).view(-1, 1, 1)
            state[f"{base}.{names[1]}"] = value * 4.0
        else:
            state[PREFIX + key] = value.clone()
    n = model.config["n_codes"]
    state[PREFIX + "quantizer.vq.layers.0._codebook.embed_avg"] = torch.zeros(n, model.config["dim"])
    state[PREFIX + "quantizer.vq.layers.0._codebook.cluster_size"] = torch.zeros(n)
    state[PREFIX + "quantizer.vq.layers.0._codebook.inited"] = torch.ones(1)
    state[PREFIX + "decoder.model.0.conv.conv.weight_g"] = torch.ones(3, 1, 1)
    state["backbone.embed.weight"] = torch.zeros(2, 2, 7)
    state["head.out.weight"] = torch.zeros(2, 2)
    return state


def test_config_fits_the_vocabulary_audio_block(encoder):
    audio = next(b for b in yaml.safe_load(VOCAB.read_text())["blocks"] if b["name"] == "audio")
    assert encoder.config["n_codes"] == 4096 <= audio["size"]
    assert encoder.config["hop"] == 600 and encoder.config["sample_rate"] == 24000
    assert encoder.config["codes_per_second"] == 40


@pytest.mark.parametrize("samples", [1, 599, 600, 601, 1200, 24000, 3 * 24000 + 17])
def test_one_code_per_600_samples_rounded_up(encoder, samples):
    codes = encoder.encode(clip(samples, samples)[None])
    assert codes.shape == (1, math.ceil(samples / 600)) and codes.dtype == torch.int64
    assert 0 <= int(codes.min()) and int(codes.max()) < CONFIG["n_codes"]


def test_codes_are_deterministic_nearest_rows(encoder):
    wave = torch.stack([clip(1, 48000), clip(2, 48000)])
    codes = encoder.encode(wave)
    assert codes.shape == (2, 80)
    assert torch.equal(codes, WavTokenizerEncoder.seeded(CONFIG, seed=CONFIG["seed"]).encode(wave))
    assert torch.equal(codes, encoder.encode(wave))
    assert len(codes.unique()) > 40                      # the seeded codebook is used, not one row
    assert not torch.equal(codes, WavTokenizerEncoder.seeded(CONFIG, seed=1).encode(wave))
    with torch.no_grad():  # the same choice computed independently, in float64: full squared distances
        z = encoder.encoder(wave[:, None]).double().transpose(1, 2)
        dist = torch.cdist(z, encoder.codebook.double()[None].expand(2, -1, -1))
    assert torch.equal(dist.argmin(-1), codes)


def test_seeding_leaves_the_callers_random_state_alone():
    torch.manual_seed(123)
    expected = torch.rand(3)
    torch.manual_seed(123)
    WavTokenizerEncoder.seeded(CONFIG, seed=0)
    assert torch.equal(torch.rand(3), expected)


def test_batched_clips_match_alone_except_the_last_five_codes(encoder):
    long = clip(10, 5 * 24000)
    differing = []
    for seed, samples in [(11, 2 * 24000), (12, 3 * 24000 + 250), (13, 61 * 600 - 1)]:
        short = clip(seed, samples)
        alone = encoder.encode(short[None])[0]
        batch = torch.zeros(2, long.shape[0])
        batch[0, :samples], batch[1] = short, long
        batched = encoder.encode(batch)
        n = alone.shape[0]
        assert torch.equal(batched[0, :n - 5], alone[:-5]), (seed, (batched[0, :n] != alone).nonzero().flatten())
        assert torch.equal(batched[1], encoder.encode(long[None])[0])   # the longest row is unpadded
        differing.append(int((batched[0, n - 5:n] != alone[-5:]).sum()))
    print(f"codes differing among the last five (alone vs batched): {differing}")


def test_checkpoint_round_trip_in_the_published_layout(encoder, tmp_path):
    wave = clip(20, 24000 + 333)[None]
    expected = encoder.encode(wave)
    (tmp_path / "config.yaml").write_text(yaml.safe_dump({k: v for k, v in CONFIG.items() if k != "seed"}))
    torch.save({"state_dict": published_state(encoder), "epoch": 3, "global_step": 1000},
               tmp_path / "wavtokenizer.ckpt")
    assert torch.equal(WavTokenizerEncoder.from_checkpoint(tmp_path / "wavtokenizer.ckpt").encode(wave), expected)
    assert torch.equal(WavTokenizerEncoder.from_checkpoint(tmp_path).encode(wave), expected)   # the folder
    assert torch.equal(load_audio_codec(str(tmp_path)).encode(wave), expected)

    torch.save({"state_dict": published_state(encoder, "parametrizations")}, tmp_path / "wavtokenizer.ckpt")
    assert torch.equal(WavTokenizerEncoder.from_checkpoint(tmp_path).encode(wave), expected)


def test_checkpoint_errors_name_the_tensor(encoder, tmp_path):
    (tmp_path / "config.yaml").write_text(yaml.safe_dump({k: v for k, v in CONFIG.items() if k != "seed"}))
    ckpt = tmp_path / "wavtokenizer.ckpt"
    state = published_state(encoder)
    del state[PREFIX + "encoder.model.3.conv.conv.weight_g"]
    torch.save({"state_dict": state}, ckpt)
    with pytest.raises(InputError, match=r"missing .*encoder\.model\.3\.conv\.conv\.weight_g"):
        WavTokenizerEncoder.from_checkpoint(ckpt)

    state = published_state(encoder)
    state[CODEBOOK_KEY] = torch.zeros(1024, CONFIG["dim"])
    torch.save({"state_dict": state}, ckpt)
    with pytest.raises(InputError, match=r"misshaped .*_codebook\.embed \(1024, 64\)"):
        WavTokenizerEncoder.from_checkpoint(ckpt)

    state = published_state(encoder)
    state[PREFIX + "encoder.model.0.conv.conv.weight_v"] = torch.zeros(8, 1, 5)
    torch.save({"state_dict": state}, ckpt)
    with pytest.raises(InputError, match=r"misshaped .*model\.0\.conv\.conv\.weight_v \(8, 1, 5\)"):
        WavTokenizerEncoder.from_checkpoint(ckpt)

    torch.save({"state_dict": published_state(encoder), "extra": np.dtype("float32")}, ckpt)
    with pytest.raises(InputError, match="weights-only"):     # a pickled object is refused, not unpickled
        WavTokenizerEncoder.from_checkpoint(ckpt)

    (tmp_path / "config.yaml").unlink()
    with pytest.raises(InputError, match="config.yaml"):
        WavTokenizerEncoder.from_checkpoint(ckpt)
    with pytest.raises(InputError, match="nowhere is missing"):
        WavTokenizerEncoder.from_checkpoint(tmp_path / "nowhere")
    ckpt.rename(tmp_path / "elsewhere.txt")
    with pytest.raises(InputError, match="exactly one .ckpt"):
        WavTokenizerEncoder.from_checkpoint(tmp_path)
    bad = tmp_path / "noseed.yaml"
    bad.write_text("n_codes: 4096\n")
    with pytest.raises(InputError, match="seed"):
        load_audio_codec(str(bad))


def test_published_lightning_config_gives_the_published_encoder(tmp_path):
    """The architecture the public model summary prints: kernels 2·ratio with the ratios reversed,
    channels 32 → 512, a 2-layer 512 LSTM at model.13, the last conv at model.15, codebook 4096 × 512."""
    (tmp_path / "config.yaml").write_text(yaml.safe_dump({"model": {"init_args": {"feature_extractor": {
        "class_path": "decoder.feature_extractors.EncodecFeatures",
        "init_args": {"encodec_model": "encodec_24khz", "bandwidths": [6.6] * 4, "num_quantizers": 1,
                      "dowmsamples": [6, 5, 5, 4], "vq_bins": 4096, "vq_kmeans": 200}}}}}))
    from curation.steps.audio.codec import _checkpoint_config
    cfg = _checkpoint_config(yaml.safe_load((tmp_path / "config.yaml").read_text()), tmp_path / "config.yaml")
    model = WavTokenizerEncoder(cfg)
    assert model.config["hop"] == 600 and model.config["n_codes"] == 4096
    assert cfg["n_filters"] == PUBLISHED["n_filters"] == 32 and cfg["dim"] == 512
    layers = {i: m.conv.conv for i, m in enumerate(model.encoder.model) if hasattr(m, "conv")}
    convs = {i: (c.in_channels, c.out_channels, c.kernel_size[0], c.stride[0]) for i, c in layers.items()}
    assert convs == {0: (1, 32, 7, 1), 3: (32, 64, 8, 4), 6: (64, 128, 10, 5), 9: (128, 256, 10, 5),
                     12: (256, 512, 12, 6), 15: (512, 512, 7, 1)}
    shapes = {k: tuple(v.shape) for k, v in model.state_dict().items()}
    assert shapes["encoder.model.1.block.1.conv.conv.weight"] == (16, 32, 3)
    assert shapes["encoder.model.10.shortcut.conv.conv.weight"] == (256, 256, 1)
    assert shapes["encoder.model.13.lstm.weight_hh_l1"] == (2048, 512)
    assert shapes["codebook"] == (4096, 512)
    frame75 = WavTokenizerEncoder({**cfg, "ratios": [8, 5, 4, 2]})        # the 75-codes/s model's summary
    assert [frame75.encoder.model[i].conv.conv.kernel_size[0] for i in (3, 6, 9, 12)] == [4, 8, 10, 16]

    (tmp_path / "config.yaml").write_text(yaml.safe_dump({"model": {"init_args": {"feature_extractor": {
        "init_args": {"num_quantizers": 4}}}}}))
    torch.save({"state_dict": {}}, tmp_path / "m.ckpt")
    with pytest.raises(InputError, match="num_quantizers"):
        WavTokenizerEncoder.from_checkpoint(tmp_path)


def test_precision_contract(encoder):
    for dtype in (torch.float64, torch.bfloat16, torch.float16):
        with pytest.raises(ValueError, match="float32"):
            encoder.encode(torch.zeros(1, 600, dtype=dtype))
    with pytest.raises(ValueError, match=r"\(batch, samples\)"):
        encoder.encode(torch.zeros(600))


def test_load_audio_codec_seeded_yaml_is_cached():
    a = load_audio_codec(str(CONFIG_PATH))
    assert a is load_audio_codec(str(CONFIG_PATH))
    assert a.config["n_codes"] == 4096
