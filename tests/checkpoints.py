"""Checkpoint folders in the published key layouts, built from small seeded codecs (no download).

Emu3.5 IBQ (BAAI/Emu3.5-VisionTokenizer): `config.yaml` (`ddconfig`, `n_embed`, `embed_dim` at the
top, as `IBQ(**cfg)` reads it) and/or `config.json` (the Hugging Face form, `model_type`
Emu3p5VisionVQ), weights in `model.ckpt` (a Lightning-style `{"state_dict": ...}`) or
`model.safetensors` (flat); the encoder's tensors plus the decoder half the encoder never uses.
WavTokenizer: a Lightning `.ckpt` whose `state_dict` keeps the encoder under
`feature_extractor.encodec.encoder.*` with weight-norm `weight_g`/`weight_v`, the codebook at
`...quantizer.vq.layers.0._codebook.embed` beside its EMA buffers, the decoder, Vocos backbone and
ISTFT head; next to it the Lightning-CLI training config."""
from __future__ import annotations

import json
from pathlib import Path

import torch
import yaml

from curation.steps.audio.codec import CODEBOOK_KEY, PREFIX


def ibq_state(model) -> dict:
    """The published IBQ state dict: the encoder's own names, plus decoder tensors it does not use."""
    state = {k: v.clone() for k, v in model.state_dict().items()}
    cfg = model.config
    z, ch = cfg["ddconfig"]["z_channels"], cfg["ddconfig"]["ch"]
    state["post_quant_conv.weight"] = torch.randn(z, cfg["embed_dim"], 1, 1)
    state["post_quant_conv.bias"] = torch.zeros(z)
    state["decoder.conv_in.weight"] = torch.randn(ch, z, 3, 3)
    state["decoder.up.0.block.0.norm1.weight"] = torch.ones(ch)
    state["decoder.conv_out.weight"] = torch.randn(3, ch, 3, 3)
    return state


def write_ibq(folder: Path, model, *, weights: str = "model.ckpt", configs=("config.yaml",), state=None) -> Path:
    """A BAAI/Emu3.5-VisionTokenizer-style folder for `model` (an IBQEncoder)."""
    folder.mkdir(parents=True, exist_ok=True)
    cfg = model.config
    if "config.yaml" in configs:
        (folder / "config.yaml").write_text(yaml.safe_dump({
            "ddconfig": {**cfg["ddconfig"], "out_ch": 3, "dropout": 0.0}, "n_embed": cfg["n_embed"],
            "embed_dim": cfg["embed_dim"], "beta": 0.25, "use_entropy_loss": True, "cosine_similarity": False}))
    if "config.json" in configs:
        dd = cfg["ddconfig"]
        (folder / "config.json").write_text(json.dumps({
            "architectures": ["Emu3p5VisionVQModel"], "model_type": "Emu3p5VisionVQ",
            "codebook_size": cfg["n_embed"], "embed_dim": cfg["embed_dim"], "z_channels": dd["z_channels"],
            "double_z": False, "in_channels": dd["in_channels"], "out_ch": 3, "ch": dd["ch"],
            "ch_mult": list(dd["ch_mult"]), "num_res_blocks": dd["num_res_blocks"],
            "attn_resolutions": list(dd["attn_resolutions"]), "resolution": dd["resolution"], "dropout": 0.0}))
    state = ibq_state(model) if state is None else state
    if weights.endswith(".safetensors"):
        from safetensors.torch import save_file
        save_file({k: v.contiguous() for k, v in state.items()}, str(folder / weights))
    else:
        torch.save({"state_dict": state, "epoch": 7, "global_step": 123456}, folder / weights)
    return folder


def wavtokenizer_state(model, form: str = "weight_g") -> dict:
    """The encoder's weights in the published Lightning layout: weight-normed convs as g and v (v scaled
    by a power of two, which the loader's normalisation takes out exactly), plus the parts it skips."""
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
    state["multiperioddisc.discriminators.0.convs.0.weight_v"] = torch.zeros(2, 1, 5, 1)
    return state


def wavtokenizer_config(model) -> dict:
    """The Lightning-CLI training config (model.init_args.feature_extractor...) for `model`'s encoder."""
    return {"seed_everything": 3407, "model": {"class_path": "decoder.experiment.WavTokenizer", "init_args": {
        "sample_rate": 24000,
        "feature_extractor": {"class_path": "decoder.feature_extractors.EncodecFeatures", "init_args": {
            "encodec_model": "encodec_24khz", "bandwidths": [6.6] * 4, "train_codebooks": True,
            "num_quantizers": 1, "dowmsamples": list(model.config["ratios"]),
            "vq_bins": model.config["n_codes"], "vq_kmeans": 200}},
        "backbone": {"class_path": "decoder.models.VocosBackbone", "init_args": {"input_channels": 512}}}}}


def write_wavtokenizer(folder: Path, model, *, flat_config: bool = True, name: str = "wavtokenizer.ckpt",
                       config_name: str = "config.yaml", state=None) -> Path:
    """A folder with a Lightning `.ckpt` and its config: the flat form (the seeded yaml's fields, for
    small test encoders) or the published Lightning-CLI form (which fixes the published widths)."""
    folder.mkdir(parents=True, exist_ok=True)
    cfg = {k: v for k, v in model.config.items() if k in ("sample_rate", "n_codes", "dim", "n_filters", "ratios")}
    (folder / config_name).write_text(yaml.safe_dump(cfg if flat_config else wavtokenizer_config(model)))
    state = wavtokenizer_state(model) if state is None else state
    if name.endswith(".safetensors"):
        from safetensors.torch import save_file
        save_file({k: v.contiguous() for k, v in state.items()}, str(folder / name))
    else:
        torch.save({"state_dict": state, "epoch": 3, "global_step": 1000}, folder / name)
    return folder
