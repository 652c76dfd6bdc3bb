"""Image codec: an IBQ encoder of the Emu3.5 vision-tokenizer family (image → grid of codes).

Architecture (config-driven, as the published checkpoint's `config.yaml` describes it): a taming-style
convolutional encoder (GroupNorm(32) + swish, ResNet blocks, self-attention at the listed
resolutions, stride-2 downsampling between the `ch_mult` levels: five levels give 16×16 pixels per
code), `quant_conv` to the embedding dimension, and a codebook (131,072 × 256 in the published
model). A code is the argmax of the dot product between the feature and the codebook rows, the
index-backpropagation quantiser's choice; no softmax or one-hot product is ever formed.

Loading goes through `curation.steps.codecs.load_codec(path, IBQEncoder)`: the published folder
(BAAI/Emu3.5-VisionTokenizer: `config.yaml` with `ddconfig`, `n_embed`, `embed_dim` and/or
`config.json`; weights in `model.safetensors` or `model.ckpt`, whose `state_dict` holds `encoder.`,
`quant_conv.`, `quantize.` and the unused `decoder.`, `post_quant_conv.` tensors under the same names
as this module's), or `IBQEncoder.seeded(config)`: the same architecture with seeded random weights,
for the demo and tests (nothing is downloaded).

Precision contract: float32 on CPU; on CUDA float32 with TF32 matmuls and convolutions enabled
explicitly. Half precision flips codes (the argmax over 131k near-ties is not stable), so any other
dtype is refused.
"""
from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from curation.errors import InputError
from curation.steps.codecs import Layout


def _norm(channels: int) -> nn.GroupNorm:
    return nn.GroupNorm(num_groups=32, num_channels=channels, eps=1e-6, affine=True)


class ResnetBlock(nn.Module):
    def __init__(self, cin: int, cout: int):
        super().__init__()
        self.norm1, self.conv1 = _norm(cin), nn.Conv2d(cin, cout, 3, padding=1)
        self.norm2, self.conv2 = _norm(cout), nn.Conv2d(cout, cout, 3, padding=1)
        self.nin_shortcut = nn.Conv2d(cin, cout, 1) if cin != cout else None

    def forward(self, x):
        h = self.conv1(F.silu(self.norm1(x)))
        h = self.conv2(F.silu(self.norm2(h)))
        return (self.nin_shortcut(x) if self.nin_shortcut is not None else x) + h


class AttnBlock(nn.Module):
    def __init__(self, c: int):
        super().__init__()
        self.norm = _norm(c)
        self.q, self.k, self.v, self.proj_out = (nn.Conv2d(c, c, 1) for _ in range(4))

    def forward(self, x):
        b, c, h, w = x.shape
        y = self.norm(x)
        q, k, v = (t.reshape(b, c, h * w).transpose(1, 2) for t in (self.q(y), self.k(y), self.v(y)))
        out = F.scaled_dot_product_attention(q, k, v)
        return x + self.proj_out(out.transpose(1, 2).reshape(b, c, h, w))


class Downsample(nn.Module):
    def __init__(self, c: int):
        super().__init__()
        self.conv = nn.Conv2d(c, c, 3, stride=2, padding=0)

    def forward(self, x):
        return self.conv(F.pad(x, (0, 1, 0, 1)))  # taming's asymmetric padding


class Encoder(nn.Module):
    """taming-transformers' Encoder, with its parameter names (so published weights load as they are)."""

    def __init__(self, *, ch: int, ch_mult, num_res_blocks: int, attn_resolutions, in_channels: int,
                 resolution: int, z_channels: int, double_z: bool = False, **_ignored):
        super().__init__()
        self.conv_in = nn.Conv2d(in_channels, ch, 3, padding=1)
        self.down = nn.ModuleList()
        cur, cin = resolution, ch
        mults = (1, *ch_mult)
        for i in range(len(ch_mult)):
            level = nn.Module()
            level.block, level.attn = nn.ModuleList(), nn.ModuleList()
            cout = ch * mults[i + 1]
            for _ in range(num_res_blocks):
                level.block.append(ResnetBlock(cin, cout))
                cin = cout
                if cur in attn_resolutions:
                    level.attn.append(AttnBlock(cin))
            if i != len(ch_mult) - 1:
                level.downsample = Downsample(cin)
                cur //= 2
            self.down.append(level)
        self.mid = nn.Module()
        self.mid.block_1, self.mid.attn_1, self.mid.block_2 = ResnetBlock(cin, cin), AttnBlock(cin), ResnetBlock(cin, cin)
        self.norm_out = _norm(cin)
        self.conv_out = nn.Conv2d(cin, 2 * z_channels if double_z else z_channels, 3, padding=1)

    def forward(self, x):
        h = self.conv_in(x)
        for level in self.down:
            for i, block in enumerate(level.block):
                h = block(h)
                if len(level.attn):
                    h = level.attn[i](h)
            if hasattr(level, "downsample"):
                h = level.downsample(h)
        h = self.mid.block_2(self.mid.attn_1(self.mid.block_1(h)))
        return self.conv_out(F.silu(self.norm_out(h)))


class _Quantize(nn.Module):
    def __init__(self, n_embed: int, embed_dim: int):
        super().__init__()
        self.embedding = nn.Embedding(n_embed, embed_dim)


class IBQEncoder(nn.Module):
    """The encoder half of Emu3.5's IBQ tokenizer; the family protocol of `curation.steps.codecs`."""
    kind = "image"
    config_files = ("config.yaml", "config.json")            # both ship in BAAI/Emu3.5-VisionTokenizer
    weight_files = ("model.safetensors", "model.ckpt")
    patch = 16

    def __init__(self, ddconfig: dict, n_embed: int, embed_dim: int):
        super().__init__()
        if ddconfig.get("double_z", False):
            raise InputError("image codec: ddconfig.double_z is true: the encoder would emit 2·z_channels, which "
                             "quant_conv (z_channels in) cannot take; the published config sets it false")
        self.config = {"ddconfig": dict(ddconfig), "n_embed": n_embed, "embed_dim": embed_dim}
        self.encoder = Encoder(**ddconfig)
        self.quant_conv = nn.Conv2d(ddconfig["z_channels"], embed_dim, 1)
        self.quantize = _Quantize(n_embed, embed_dim)
        self.patch = 2 ** (len(ddconfig["ch_mult"]) - 1)
        self.eval()

    @property
    def codebook_size(self) -> int:
        return self.config["n_embed"]

    @property
    def embedding_dim(self) -> int:
        return self.config["embed_dim"]

    @classmethod
    def seeded(cls, config: dict, seed: int = 0) -> IBQEncoder:
        torch.manual_seed(seed)
        return cls(config["ddconfig"], int(config["n_embed"]), int(config["embed_dim"]))

    @classmethod
    def from_configs(cls, configs: dict[str, object]) -> IBQEncoder:
        """The architecture of `config.yaml` (taming style: `ddconfig`, `n_embed`, `embed_dim`, at the top
        or under `model.params`) and/or `config.json` (the Hugging Face form, `model_type` Emu3p5VisionVQ:
        the ddconfig fields flat, `codebook_size`); when both are there they must agree."""
        parsed = {name: _ibq_config(name, raw) for name, raw in configs.items()}
        (first, cfg), *rest = parsed.items()
        for name, other in rest:
            for key in ("n_embed", "embed_dim", *_SHAPED):
                a = cfg["ddconfig"].get(key, cfg.get(key))
                b = other["ddconfig"].get(key, other.get(key))
                if key in _SHAPED and (a is None or b is None):
                    continue
                if _listed(a) != _listed(b):
                    raise InputError(f"image codec: {first} and {name} disagree on {key} ({a} vs {b}); keep "
                                     f"the files published together")
        return cls(cfg["ddconfig"], cfg["n_embed"], cfg["embed_dim"])

    def layout(self, names: set[str]) -> Layout:
        """Published names are this module's own; the decoder half is present in the files but unused."""
        return Layout({k: tuple(v.shape) for k, v in self.state_dict().items()},
                      scope=("encoder.", "quant_conv.", "quantize."), unused=("decoder.", "post_quant_conv."))

    def assemble(self, tensors: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        return tensors

    @torch.no_grad()
    def encode(self, pixels: torch.Tensor) -> torch.Tensor:
        """(B, 3, H, W) in [-1, 1], H and W multiples of the patch → (B, H/patch, W/patch) int64 codes."""
        if pixels.dtype != torch.float32:
            raise ValueError(f"pixels must be float32 (the precision contract), got {pixels.dtype}; "
                             f"half precision changes codes")
        if pixels.shape[-1] % self.patch or pixels.shape[-2] % self.patch:
            raise ValueError(f"image size {tuple(pixels.shape[-2:])} is not a multiple of {self.patch}")
        if pixels.is_cuda:
            torch.backends.cuda.matmul.allow_tf32 = True
            torch.backends.cudnn.allow_tf32 = True
        z = self.quant_conv(self.encoder(pixels))                       # (B, D, h, w)
        b, d, h, w = z.shape
        flat = z.permute(0, 2, 3, 1).reshape(-1, d)
        codes = torch.empty(flat.shape[0], dtype=torch.int64, device=z.device)
        book = self.quantize.embedding.weight
        for s in range(0, flat.shape[0], 1024):  # rows at a time: never a (positions × 131k) tensor at once
            codes[s:s + 1024] = (flat[s:s + 1024] @ book.T).argmax(-1)
        return codes.view(b, h, w)


_SHAPED = ("ch", "ch_mult", "num_res_blocks", "attn_resolutions", "resolution", "in_channels", "z_channels",
           "double_z")   # the ddconfig fields that decide tensor names or shapes


def _listed(v):
    return list(v) if isinstance(v, (list, tuple)) else v


def _ibq_config(name: str, raw) -> dict:
    """{"ddconfig", "n_embed", "embed_dim"} from one published config file, or an InputError naming it."""
    if not isinstance(raw, dict):
        raise InputError(f"image codec {name}: not a mapping")
    if name.endswith(".json"):
        if raw.get("model_type", "Emu3p5VisionVQ") != "Emu3p5VisionVQ":
            raise InputError(f"image codec {name}: model_type {raw['model_type']!r} is not Emu3p5VisionVQ "
                             f"(the Emu3.5 vision tokenizer); Emu3's tokenizer has another architecture")
        need = ("codebook_size", "embed_dim", "z_channels", "ch", "ch_mult", "num_res_blocks", "attn_resolutions",
                "resolution", "in_channels")
        missing = [k for k in need if k not in raw]
        if missing:
            raise InputError(f"image codec {name}: missing {', '.join(missing)}")
        dd = {k: raw[k] for k in need[2:]} | {"double_z": raw.get("double_z", False)}
        return {"ddconfig": dd, "n_embed": int(raw["codebook_size"]), "embed_dim": int(raw["embed_dim"])}
    cfg = raw.get("model", {}).get("params", raw) if isinstance(raw.get("model"), dict) else raw
    missing = [k for k in ("ddconfig", "n_embed", "embed_dim") if k not in cfg]
    if missing:
        raise InputError(f"image codec {name}: missing {', '.join(missing)} (at the top or under model.params)")
    dd = cfg["ddconfig"]
    absent = [k for k in _SHAPED[:-1] if k not in dd]
    if absent:
        raise InputError(f"image codec {name}: ddconfig lacks {', '.join(absent)}")
    return {"ddconfig": dict(dd), "n_embed": int(cfg["n_embed"]), "embed_dim": int(cfg["embed_dim"])}


def to_pixels(img, size: tuple[int, int]) -> torch.Tensor:
    """PIL RGB image → (3, H, W) float32 in [-1, 1], bicubic-resized to `size` (width, height)."""
    from PIL import Image
    arr = np.asarray(img.convert("RGB").resize(size, Image.BICUBIC), dtype=np.float32)
    return torch.from_numpy(arr).permute(2, 0, 1) / 127.5 - 1.0


def layout(codes: np.ndarray, vocab) -> np.ndarray:
    """The token sequence of one image: start, "H*W" as text, size-end, rows of codes with end-of-row
    markers (between rows or after each, per the vocabulary's `image_layout`), optional end-of-frame,
    end marker. Codes are offset into the vocabulary's image block."""
    h, w = codes.shape
    base = vocab.block("image").start
    after_each = vocab.image_layout.get("end_of_row", "between") == "after_each"
    eor = vocab.marker("end_of_row")
    out = [vocab.marker("image_start"), *vocab.tokenizer.encode(f"{h}*{w}", add_special_tokens=False).ids,
           vocab.marker("image_size_end")]
    for r in range(h):
        out.extend((codes[r] + base).tolist())
        if after_each or r < h - 1:
            out.append(eor)
    if vocab.image_layout.get("end_of_frame"):
        out.append(vocab.marker("end_of_frame"))
    out.append(vocab.marker("image_end"))
    return np.asarray(out, dtype=np.int32)
