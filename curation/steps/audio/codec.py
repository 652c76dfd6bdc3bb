"""Audio codec: the encoder of the WavTokenizer family (24 kHz mono waveform → one code per 600 samples).

Architecture (the published model's `EncodecFeatures` encoder, config-driven here): EnCodec's SEANet
encoder, non-causal, every convolution weight-normed. A 7-tap input conv to `n_filters` channels,
then per downsampling ratio a residual unit (ELU, k3 conv to half the channels, ELU, 1x1 conv back,
plus a 1x1 conv shortcut: `true_skip` is off) and ELU + a strided conv (kernel 2·ratio, stride ratio)
doubling the channels. The ratios are listed as in the published config (`dowmsamples: [6, 5, 5, 4]`)
and applied reversed (strides 4, 5, 5, 6), as EnCodec does: hop 600, 40 codes per second. Then a
2-layer unidirectional LSTM with a skip connection, ELU and a 7-tap conv to the codebook dimension.
Convolutions pad like EnCodec's `SConv1d`: reflect padding, the odd sample on the left. One vector
quantiser follows (published: 4,096 × 512); a code is the nearest codebook row in Euclidean distance,
computed as the argmin of ||c||² − 2·x·c (||x||² is the same for every row), never a softmax.

Loading goes through `curation.steps.codecs.load_codec(path, WavTokenizerEncoder)`: a folder with the
published Lightning `.ckpt` (or a `.safetensors` of its state dict) and the training config
(`config.yaml`, or the one `*.yaml` there: the Lightning-CLI file, whose
`model.init_args.feature_extractor.init_args` gives `dowmsamples`, `vq_bins`, `num_quantizers`; the
rest of the encoder is fixed in the published code and in `PUBLISHED` here). Of the `state_dict` only
`feature_extractor.encodec.encoder.*` and the codebook
`feature_extractor.encodec.quantizer.vq.layers.0._codebook.embed` are used, every tensor under the
encoder's prefix is checked; the decoder, backbone, head, discriminators and the quantiser's EMA
buffers are skipped. Weight norm may be stored as `weight_g`/`weight_v` (the
`torch.nn.utils.weight_norm` hooks the published model was trained with), as
`parametrizations.weight.original0/original1` (newer torch), or already folded into `weight`; the
effective weight g·v/||v|| is computed once at load time. `WavTokenizerEncoder.seeded(config, seed)` builds the same architecture with
seeded random weights (small configs for the demo and tests), its last conv and codebook fitted to a
seeded synthetic clip so that codes spread over the codebook: valid, deterministic codes, not
meaningful ones; nothing is downloaded.

Precision contract: float32 waveforms only (any other dtype is refused); float32 on CPU, on CUDA with
TF32 matmuls and convolutions enabled explicitly. Input is padded with zeros to a multiple of the hop,
so a clip of T samples gives ceil(T / 600) codes (the published code instead reflect-pads inside each
strided conv, so for T not a multiple of 600 its last code may differ from ours). The encoder is
non-causal (the last conv alone sees three frames ahead), so the last codes of a clip depend on what
follows it: encoded alone or zero-padded inside a batch, a clip's last five codes may differ (up to
four did in tests); the codes before them are the same.
"""
from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from curation.errors import InputError
from curation.steps.codecs import Layout

PREFIX = "feature_extractor.encodec."                          # where the Lightning module keeps EnCodec
CODEBOOK_KEY = PREFIX + "quantizer.vq.layers.0._codebook.embed"
# weight norm as stored: torch.nn.utils.weight_norm's hooks (the published files), then parametrizations
_NORM_FORMS = (("weight_g", "weight_v"), ("parametrizations.weight.original0", "parametrizations.weight.original1"))

# The encoder hyper-parameters the published `EncodecFeatures` hard-codes (only the ratios and the
# codebook come from its config.yaml).
PUBLISHED = {
    "sample_rate": 24000, "n_filters": 32, "dim": 512, "n_residual_layers": 1, "lstm": 2,
    "kernel_size": 7, "residual_kernel_size": 3, "last_kernel_size": 7, "dilation_base": 2,
    "compress": 2, "true_skip": False, "causal": False, "pad_mode": "reflect",
}
_DEFAULT_RATIOS, _DEFAULT_BINS = [6, 5, 5, 4], 16384            # EncodecFeatures' own defaults


def _pad1d(x: torch.Tensor, left: int, right: int, mode: str) -> torch.Tensor:
    """F.pad that also reflect-pads inputs shorter than the padding (zeros first, as EnCodec does)."""
    if mode != "reflect":
        return F.pad(x, (left, right), mode="constant" if mode in ("zero", "constant") else mode)
    length, extra = x.shape[-1], 0
    if length <= max(left, right):
        extra = max(left, right) - length + 1
        x = F.pad(x, (0, extra))
    out = F.pad(x, (left, right), mode="reflect")
    return out[..., :out.shape[-1] - extra]


class SConv1d(nn.Module):
    """A Conv1d with EnCodec's padding; the layer sits at `.conv.conv` as in `SConv1d → NormConv1d → Conv1d`,
    so the parameter names are the published ones (with the weight norm folded into `weight`)."""

    def __init__(self, cin: int, cout: int, kernel: int, stride: int = 1, dilation: int = 1, *,
                 causal: bool = False, pad_mode: str = "reflect"):
        super().__init__()
        self.conv = nn.Module()
        self.conv.conv = nn.Conv1d(cin, cout, kernel, stride, dilation=dilation)
        self.causal, self.pad_mode = causal, pad_mode
        self.kernel, self.stride, self.dilation = kernel, stride, dilation

    def forward(self, x):
        k, s = (self.kernel - 1) * self.dilation + 1, self.stride
        total = k - s
        frames = (x.shape[-1] - k + total) / s + 1
        extra = (math.ceil(frames) - 1) * s + (k - total) - x.shape[-1]   # so that the last window is full
        if self.causal:
            x = _pad1d(x, total, extra, self.pad_mode)
        else:
            right = total // 2
            x = _pad1d(x, total - right, right + extra, self.pad_mode)
        return self.conv.conv(x)


class ResidualUnit(nn.Module):
    """SEANetResnetBlock: `block` = ELU, k-tap conv to dim/compress, ELU, 1x1 conv back; plus `shortcut`."""

    def __init__(self, dim: int, kernel: int, dilation: int, compress: int, true_skip: bool, **pad):
        super().__init__()
        hidden = dim // compress
        self.block = nn.Sequential(nn.ELU(), SConv1d(dim, hidden, kernel, dilation=dilation, **pad),
                                   nn.ELU(), SConv1d(hidden, dim, 1, **pad))
        self.shortcut = nn.Identity() if true_skip else SConv1d(dim, dim, 1, **pad)

    def forward(self, x):
        return self.shortcut(x) + self.block(x)


class SkipLSTM(nn.Module):
    """EnCodec's SLSTM: a unidirectional LSTM over time (at `.lstm`) plus its input."""

    def __init__(self, dim: int, layers: int):
        super().__init__()
        self.lstm = nn.LSTM(dim, dim, layers)

    def forward(self, x):                       # (B, C, T)
        seq = x.permute(2, 0, 1)                # (T, B, C)
        y, _ = self.lstm(seq)
        return (y + seq).permute(1, 2, 0)


class SEANetEncoder(nn.Module):
    """EnCodec's SEANet encoder; its layers at `model.<i>` in the published order (ELUs included)."""

    def __init__(self, cfg: dict):
        super().__init__()
        pad = {"causal": cfg["causal"], "pad_mode": cfg["pad_mode"]}
        nf, mult = cfg["n_filters"], 1
        layers: list[nn.Module] = [SConv1d(1, nf, cfg["kernel_size"], **pad)]
        for ratio in reversed(cfg["ratios"]):
            for j in range(cfg["n_residual_layers"]):
                layers.append(ResidualUnit(mult * nf, cfg["residual_kernel_size"], cfg["dilation_base"] ** j,
                                           cfg["compress"], cfg["true_skip"], **pad))
            layers += [nn.ELU(), SConv1d(mult * nf, 2 * mult * nf, 2 * ratio, ratio, **pad)]
            mult *= 2
        if cfg["lstm"]:
            layers.append(SkipLSTM(mult * nf, cfg["lstm"]))
        layers += [nn.ELU(), SConv1d(mult * nf, cfg["dim"], cfg["last_kernel_size"], **pad)]
        self.model = nn.Sequential(*layers)

    def forward(self, x):
        return self.model(x)


def _full_config(cfg: dict) -> dict:
    out = {**PUBLISHED, "ratios": list(_DEFAULT_RATIOS)}
    out.update({k: v for k, v in cfg.items() if k != "seed"})
    out["ratios"] = [int(r) for r in out["ratios"]]
    out["n_codes"] = int(out["n_codes"])
    out["hop"] = math.prod(out["ratios"])
    out["codes_per_second"] = out["sample_rate"] / out["hop"]
    return out


class WavTokenizerEncoder(nn.Module):
    """The encoder and codebook of WavTokenizer; the family protocol of `curation.steps.codecs`."""
    kind = "audio"
    config_files = ("config.yaml", "*.yaml")       # the training config, saved beside the checkpoint
    weight_files = ("*.safetensors", "*.ckpt")

    def __init__(self, cfg: dict):
        super().__init__()
        self.config = _full_config(cfg)
        self.hop, self.sample_rate = self.config["hop"], self.config["sample_rate"]
        self.encoder = SEANetEncoder(self.config)
        self.register_buffer("codebook", torch.zeros(self.config["n_codes"], self.config["dim"]))
        self.eval()

    @classmethod
    def seeded(cls, config: dict, seed: int = 0) -> WavTokenizerEncoder:
        """Random weights from `seed` (PyTorch's default initialisation), drawn without touching the
        caller's random state, then two data-dependent steps on a seeded synthetic clip (tones and noise
        at varying levels), as weight-norm and k-means initialisation do: the last conv is rescaled so
        that each output channel has mean 0 and variance 1 over the clip, and the codebook rows are the
        clip's frames plus a little jitter (the published training initialises its codebook by k-means
        on data). Without them a random encoder's output is a large common offset with tiny variation,
        and every code would be a near-tie decided by float rounding."""
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(seed)
            model = cls(config)
        gen = torch.Generator().manual_seed(seed)
        clip = _synthetic_clip(1000, model.hop, model.sample_rate, gen)
        with torch.inference_mode():
            z = model.encoder(clip[None, None])[0].T                      # (1000 frames, dim)
        mean, std = z.mean(0), z.std(0).clamp_min(1e-6)
        last = model.encoder.model[-1].conv.conv
        with torch.no_grad():
            last.weight.div_(std[:, None, None])
            last.bias.sub_(mean).div_(std)
        z = (z - mean) / std
        rows = torch.randint(0, z.shape[0], (model.config["n_codes"],), generator=gen)
        jitter = torch.randn(model.config["n_codes"], z.shape[1], generator=gen)
        model.codebook.copy_(z[rows] + 0.1 * jitter)
        return model

    @classmethod
    def from_configs(cls, configs: dict[str, object]) -> WavTokenizerEncoder:
        (name, raw), = configs.items()
        return cls(_checkpoint_config(raw, name))

    @property
    def codebook_size(self) -> int:
        return self.config["n_codes"]

    @property
    def embedding_dim(self) -> int:
        return self.config["dim"]

    def layout(self, names: set[str]) -> Layout:
        """The published tensors this encoder needs, each weight-normed conv in the form the file uses."""
        expected = {}
        for key, value in self.state_dict().items():
            shape = tuple(value.shape)
            if key == "codebook":
                expected[CODEBOOK_KEY] = shape
                continue
            name = PREFIX + key
            base = name[:-len(".weight")]
            if key.endswith("conv.conv.weight") and name not in names:   # weight-normed: g and v
                g, v = next(((g, v) for g, v in _NORM_FORMS if f"{base}.{g}" in names or f"{base}.{v}" in names),
                            _NORM_FORMS[0])
                expected[f"{base}.{g}"] = (shape[0], *([1] * (len(shape) - 1)))
                expected[f"{base}.{v}"] = shape
            else:
                expected[name] = shape
        return Layout(expected, scope=(PREFIX + "encoder.",), unused=None)

    def assemble(self, tensors: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        """This module's state dict from the published tensors, weight norm folded into `weight`."""
        out = {}
        for key in self.state_dict():
            if key == "codebook":
                out[key] = tensors[CODEBOOK_KEY]
                continue
            name = PREFIX + key
            if name in tensors:
                out[key] = tensors[name]
                continue
            base = name[:-len(".weight")]
            g, v = next((tensors[f"{base}.{g}"], tensors[f"{base}.{v}"]) for g, v in _NORM_FORMS
                        if f"{base}.{v}" in tensors)
            out[key] = _fold_weight_norm(v, g)
        return out

    @torch.inference_mode()
    def encode(self, wave: torch.Tensor) -> torch.Tensor:
        """(B, T) float32 waveforms at 24 kHz, mono, in [-1, 1] → (B, ceil(T / hop)) int64 codes.
        Zero-pads T to a multiple of the hop; rows of a batch are zero-padded clips of any length
        (their last few codes may then differ from the clip encoded alone; see the module docstring)."""
        if wave.dtype != torch.float32:
            raise ValueError(f"the waveform must be float32 (the precision contract), got {wave.dtype}; "
                             f"half precision changes codes")
        if wave.dim() != 2:
            raise ValueError(f"the waveform must be (batch, samples), got shape {tuple(wave.shape)}")
        if wave.shape[-1] == 0:
            raise ValueError("the waveform is empty (0 samples)")
        if wave.is_cuda:
            torch.backends.cuda.matmul.allow_tf32 = True
            torch.backends.cudnn.allow_tf32 = True
        rest = -wave.shape[-1] % self.hop
        if rest:
            wave = F.pad(wave, (0, rest))
        z = self.encoder(wave[:, None])                              # (B, D, frames)
        b, d, n = z.shape
        flat = z.transpose(1, 2).reshape(-1, d)
        book = self.codebook
        book_sq = book.pow(2).sum(1)                                 # ||c||²
        codes = torch.empty(flat.shape[0], dtype=torch.int64, device=z.device)
        for s in range(0, flat.shape[0], 1024):  # rows at a time: never a (frames × codes) tensor at once
            dist = torch.addmm(book_sq, flat[s:s + 1024], book.T, beta=1, alpha=-2)  # ||c||² − 2·x·c
            codes[s:s + 1024] = dist.argmin(-1)
        return codes.view(b, n)


def _synthetic_clip(frames: int, hop: int, sample_rate: int, gen: torch.Generator) -> torch.Tensor:
    """`frames` × `hop` samples: quarter-second-ish segments, each a mix of three random tones and white
    noise at a random level between 0 and −60 dB (material for the seeded codebook only)."""
    seg = hop * 10
    t = torch.arange(seg) / sample_rate
    parts = []
    for _ in range(math.ceil(frames / 10)):
        gain = 10 ** (-3 * torch.rand(1, generator=gen))
        freq = 60 * 2 ** (8 * torch.rand(3, 1, generator=gen))
        tones = (torch.sin(2 * math.pi * freq * t) * torch.rand(3, 1, generator=gen)).sum(0) / 3
        mix = torch.rand(1, generator=gen)
        parts.append(gain * (mix * tones + (1 - mix) * torch.randn(seg, generator=gen)))
    return torch.cat(parts)[:frames * hop]


def _checkpoint_config(raw, cfg_path: str) -> dict:
    """The encoder config from the published Lightning-CLI config.yaml (or a flat one like the seeded yaml)."""
    if isinstance(raw, dict) and "n_codes" in raw:
        return raw
    try:
        fe = raw["model"]["init_args"]["feature_extractor"]
        args = fe.get("init_args", {}) or {}
    except (KeyError, TypeError):
        raise InputError(f"{cfg_path}: no model.init_args.feature_extractor; this must be the WavTokenizer "
                         f"training config that came with the checkpoint") from None
    if not str(fe.get("class_path", "EncodecFeatures")).endswith("EncodecFeatures"):
        raise InputError(f"{cfg_path}: feature extractor {fe.get('class_path')} is not EncodecFeatures; "
                         f"only the WavTokenizer EnCodec encoder is supported")
    if int(args.get("num_quantizers", 1)) != 1:
        raise InputError(f"{cfg_path}: num_quantizers is {args['num_quantizers']}; this codec reads "
                         f"single-quantiser checkpoints (one code per frame) only")
    if args.get("encodec_model", "encodec_24khz") != "encodec_24khz":
        raise InputError(f"{cfg_path}: encodec_model {args['encodec_model']!r} is not encodec_24khz")
    return {**PUBLISHED, "ratios": list(args.get("dowmsamples", _DEFAULT_RATIOS)),
            "n_codes": int(args.get("vq_bins", _DEFAULT_BINS))}


def _fold_weight_norm(v: torch.Tensor, g: torch.Tensor) -> torch.Tensor:
    """g · v / ||v||, the norm over every dimension but the first (weight_norm's default dim=0)."""
    return v * (g.reshape(-1, *([1] * (v.dim() - 1))) / v.flatten(1).norm(dim=1).view(-1, *([1] * (v.dim() - 1))))
