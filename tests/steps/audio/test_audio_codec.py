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
)
from curation.steps.codecs import load_codec, open_checkpoint
from tests.checkpoints import (
    wavtokenizer_state,
    write_wavtokenizer,
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


@pytest.mark.slow
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


@pytest.mark.slow
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


@pytest.mark.slow
def test_seeding_leaves_the_callers_random_state_alone():
    torch.manual_seed(123)
    expected = torch.rand(3)
    torch.manual_seed(123)
    WavTokenizerEncoder.seeded(CONFIG, seed=0)
    assert torch.equal(torch.rand(3), expected)


@pytest.mark.slow
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
    folder = write_wavtokenizer(tmp_path / "wt", encoder)
    ckpt = open_checkpoint(folder, WavTokenizerEncoder)
    assert torch.equal(ckpt.model.encode(wave), expected)
    assert ckpt.skipped == 7        # EMA buffers, decoder, backbone, head, discriminator: present, unused
    assert torch.equal(open_checkpoint(folder / "wavtokenizer.ckpt", WavTokenizerEncoder).model.encode(wave), expected)
    assert torch.equal(load_codec(str(folder), WavTokenizerEncoder).encode(wave), expected)

    other = write_wavtokenizer(tmp_path / "parametrized", encoder, state=wavtokenizer_state(encoder, "parametrizations"),
                               name="wavtokenizer_large_unify_600_24k.safetensors",
                               config_name="wavtokenizer_smalldata_frame40_3s_nq1_code4096_dim512_kmeans200_attn.yaml")
    assert torch.equal(open_checkpoint(other, WavTokenizerEncoder).model.encode(wave), expected)


@pytest.mark.slow
def test_published_size_encoder_from_the_lightning_config(tmp_path):
    """The published widths (32 filters, 512 dimensions, 4,096 codes) from the Lightning-CLI config, the
    weights as weight_g/weight_v in a Lightning `state_dict`: loaded, checked and encoding as built."""
    from curation.steps.audio.codec import _checkpoint_config
    torch.manual_seed(5)
    cfg = _checkpoint_config({"model": {"init_args": {"feature_extractor": {"init_args": {"dowmsamples": [6, 5, 5, 4],
                                                                                            "vq_bins": 4096}}}}}, "c")
    model = WavTokenizerEncoder(cfg)
    model.codebook.normal_()
    folder = write_wavtokenizer(tmp_path / "large", model, flat_config=False,
                                name="wavtokenizer_large_unify_600_24k.ckpt")
    ckpt = open_checkpoint(folder, WavTokenizerEncoder)
    convs = sum(k.endswith("conv.conv.weight") for k in model.state_dict())
    assert convs == 18 and ckpt.used == len(model.state_dict()) + convs     # every conv weight as g and v
    assert ckpt.model.config == model.config
    wave = clip(30, 24000)[None]
    assert torch.equal(ckpt.model.encode(wave), model.encode(wave))


def test_checkpoint_errors_name_the_tensor(encoder, tmp_path):
    def refused(state, match):
        folder = write_wavtokenizer(tmp_path / f"case{len(list(tmp_path.iterdir()))}", encoder, state=state)
        with pytest.raises(InputError, match=match):
            open_checkpoint(folder, WavTokenizerEncoder)
        return folder

    state = wavtokenizer_state(encoder)
    del state[PREFIX + "encoder.model.3.conv.conv.weight_g"]
    refused(state, r"missing tensor feature_extractor\.encodec\.encoder\.model\.3\.conv\.conv\.weight_g "
                   r"\(expected shape \(16, 1, 1\)\)")
    state = wavtokenizer_state(encoder)
    state[CODEBOOK_KEY] = torch.zeros(1024, CONFIG["dim"])
    refused(state, r"misshapen tensor .*_codebook\.embed: shape \(1024, 64\) in the file, \(4096, 64\) expected")
    state = wavtokenizer_state(encoder)
    state[PREFIX + "encoder.model.0.conv.conv.weight_v"] = torch.zeros(8, 1, 5)
    refused(state, r"misshapen tensor .*model\.0\.conv\.conv\.weight_v: shape \(8, 1, 5\) in the file, \(8, 1, 7\)")
    state = wavtokenizer_state(encoder)
    state[PREFIX + "encoder.model.13.lstm.weight_ih_l2"] = torch.zeros(512, 128)   # a third LSTM layer
    refused(state, r"unexpected tensor .*encoder\.model\.13\.lstm\.weight_ih_l2 \(shape \(512, 128\)\)")
    state = wavtokenizer_state(encoder)
    del state[CODEBOOK_KEY]
    folder = refused(state, r"missing tensor feature_extractor\.encodec\.quantizer\.vq\.layers\.0\._codebook\.embed")

    torch.save({"state_dict": wavtokenizer_state(encoder), "extra": np.dtype("float32")}, folder / "wavtokenizer.ckpt")
    with pytest.raises(InputError, match="weights-only"):     # a pickled object is refused, not unpickled
        open_checkpoint(folder, WavTokenizerEncoder)
    (folder / "second.ckpt").write_bytes(b"")
    with pytest.raises(InputError, match=r"2 weights files match \*\.ckpt"):
        open_checkpoint(folder, WavTokenizerEncoder)
    (folder / "config.yaml").unlink()
    with pytest.raises(InputError, match=r"no configuration file \(config\.yaml or \*\.yaml\)"):
        open_checkpoint(folder / "second.ckpt", WavTokenizerEncoder)
    with pytest.raises(InputError, match="no such file or folder"):
        load_codec(str(tmp_path / "nowhere"), WavTokenizerEncoder)
    bad = tmp_path / "noseed.yaml"
    bad.write_text("n_codes: 4096\n")
    with pytest.raises(InputError, match="seed"):
        load_codec(str(bad), WavTokenizerEncoder)


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
    torch.save({"state_dict": {"x": torch.zeros(1)}}, tmp_path / "m.ckpt")
    with pytest.raises(InputError, match="num_quantizers"):
        open_checkpoint(tmp_path, WavTokenizerEncoder)


def test_precision_contract(encoder):
    for dtype in (torch.float64, torch.bfloat16, torch.float16):
        with pytest.raises(ValueError, match="float32"):
            encoder.encode(torch.zeros(1, 600, dtype=dtype))
    with pytest.raises(ValueError, match=r"\(batch, samples\)"):
        encoder.encode(torch.zeros(600))


def test_load_audio_codec_seeded_yaml_is_cached():
    a = load_codec(str(CONFIG_PATH), WavTokenizerEncoder)
    assert a is load_codec(str(CONFIG_PATH), WavTokenizerEncoder)
    assert a.config["n_codes"] == 4096
