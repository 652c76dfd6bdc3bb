"""A small hybrid Mamba-2 / grouped-query attention / MoE language model (Nemotron-H style), pure PyTorch.

One character of `ModelConfig.pattern` is one layer: `M` Mamba-2 (chunked SSD scan), `*` grouped-query
attention, `E` mixture-of-experts feed-forward, `-` dense MLP; every layer is a pre-norm residual block
`x + mixer(rmsnorm(x))`. Soofi S adopts the Nemotron 3 Nano pattern (23 M, 23 E, 6 *; no position
embeddings; sigmoid router, shared expert, squared-ReLU MLPs); `ModelConfig.tiny()` is a CPU-sized
version of it.

    >>> torch.manual_seed(0)
    >>> model = HybridLM(ModelConfig.tiny(vocab_size=512))
    >>> logits, aux = model(tokens, doc_ids)            # (B, T, output_vocab), scalar

Packed documents never see each other when `doc_ids` (B, T) is given; a document starts wherever
the id changes (or where `reset` is True), and the first position of a row always starts one:
- Mamba-2: the causal depthwise conv drops taps that reach into the previous document, and the SSD
  state is zeroed at a document start (the chunked scan masks intra-chunk decays, the chunk-end states
  and the inter-chunk state passing by segment; the CUDA kernel gets the same segments as `seq_idx`).
- Attention: an explicit boolean mask, causal AND same segment, for `F.scaled_dot_product_attention`.
  No position embeddings by default (Nemotron-H: the Mamba layers carry order); with `rope_theta`
  set, RoPE positions restart at 0 in every document.
- MoE and MLP act per token, so nothing crosses; routing statistics do pool the whole batch.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn as nn
import torch.nn.functional as F

from curation.errors import RecipeError
from curation.train.ssd import (
    causal_conv1d,
    positions_in_segment,
    segment_ids,
    ssd_scan,
)

LAYER_KINDS = {"M": "mamba", "*": "attention", "E": "moe", "-": "mlp"}


@dataclass
class ModelConfig:
    vocab_size: int = 266752             # embedding rows (the vocabulary's padded size)
    d_model: int = 128
    pattern: str = "MEM*EME"
    # grouped-query attention
    n_heads: int = 4
    n_kv_heads: int = 2
    head_dim: int | None = None          # None: d_model // n_heads
    rope_theta: float | None = None      # None: no position embeddings (Nemotron-H)
    # Mamba-2
    mamba_d_state: int = 32
    mamba_head_dim: int = 32
    mamba_expand: int = 2
    mamba_n_groups: int = 1
    mamba_chunk_size: int = 64
    mamba_d_conv: int = 4
    ssd_backend: str = "auto"            # auto (kernel on CUDA if mamba_ssm imports), torch, kernel
    # feed-forward
    mlp_hidden: int = 512                # dense `-` layers
    n_experts: int = 4
    top_k: int = 2
    shared_expert: bool = True
    expert_hidden: int = 256
    shared_expert_hidden: int | None = None   # None: expert_hidden
    router: str = "sigmoid"              # sigmoid (Nemotron 3) or softmax
    aux_loss_coef: float = 1e-2          # times the summed Switch balance loss of the MoE layers
    # output
    output_vocab: int | None = None      # None: all vocab_size rows; N: only ids < N (e.g. text only)
    tie_embeddings: bool = False
    norm_eps: float = 1e-5
    init_std: float = 0.02

    @classmethod
    def tiny(cls, **overrides) -> ModelConfig:
        """Trains on two CPU cores in minutes: d_model 128, 7 layers in Nemotron 3 Nano's ratio."""
        base = dict(vocab_size=266752, d_model=128, pattern="MEM*EME", n_heads=4, n_kv_heads=2,
                    mamba_d_state=32, mamba_head_dim=32, mamba_expand=2, mamba_n_groups=1,
                    mamba_chunk_size=64, mamba_d_conv=4, mlp_hidden=512, n_experts=4, top_k=2,
                    shared_expert=True, expert_hidden=256, router="sigmoid", aux_loss_coef=1e-2)
        return cls(**{**base, **overrides})

    @property
    def out_vocab(self) -> int:
        return self.output_vocab or self.vocab_size

    @property
    def d_inner(self) -> int:
        return self.mamba_expand * self.d_model

    @property
    def mamba_heads(self) -> int:
        return self.d_inner // self.mamba_head_dim

    @property
    def attn_head_dim(self) -> int:
        return self.head_dim or self.d_model // self.n_heads

    def validate(self) -> None:
        def bad(key, why):
            raise RecipeError(f"model.{key} = {getattr(self, key)!r}: {why}")
        if not self.pattern or set(self.pattern) - set(LAYER_KINDS):
            bad("pattern", f"one character per layer from {''.join(LAYER_KINDS)}")
        if self.d_inner % self.mamba_head_dim:
            bad("mamba_head_dim", f"must divide mamba_expand * d_model = {self.d_inner}")
        if self.mamba_heads % self.mamba_n_groups:
            bad("mamba_n_groups", f"must divide the {self.mamba_heads} Mamba heads")
        if self.n_heads % self.n_kv_heads:
            bad("n_kv_heads", f"must divide n_heads = {self.n_heads}")
        if self.head_dim is None and self.d_model % self.n_heads:
            bad("n_heads", f"must divide d_model = {self.d_model} (or set head_dim)")
        if self.rope_theta is not None and self.attn_head_dim % 2:
            bad("head_dim", "RoPE needs an even head dimension")
        if not 1 <= self.top_k <= self.n_experts:
            bad("top_k", f"must be between 1 and n_experts = {self.n_experts}")
        if self.router not in ("sigmoid", "softmax"):
            bad("router", "sigmoid or softmax")
        if self.ssd_backend not in ("auto", "torch", "kernel"):
            bad("ssd_backend", "auto, torch or kernel")
        if self.output_vocab is not None and not 0 < self.output_vocab <= self.vocab_size:
            bad("output_vocab", f"must be in 1..vocab_size = {self.vocab_size}")

    def __post_init__(self):
        self.validate()


class Mamba2(nn.Module):
    """in_proj -> (z, x, B, C, dt); causal conv + SiLU over x, B, C; SSD; y * silu(z), group RMSNorm; out_proj."""

    def __init__(self, cfg: ModelConfig):
        super().__init__()
        self.cfg = cfg
        d_in, g, n, nh = cfg.d_inner, cfg.mamba_n_groups, cfg.mamba_d_state, cfg.mamba_heads
        self.conv_dim = d_in + 2 * g * n
        self.in_proj = nn.Linear(cfg.d_model, d_in + self.conv_dim + nh, bias=False)
        self.conv1d = nn.Conv1d(self.conv_dim, self.conv_dim, cfg.mamba_d_conv, groups=self.conv_dim)
        self.dt_bias = nn.Parameter(torch.empty(nh))
        self.A_log = nn.Parameter(torch.empty(nh))
        self.D = nn.Parameter(torch.empty(nh))
        for p in (self.dt_bias, self.A_log, self.D):
            p._no_weight_decay = True          # the mamba_ssm convention
        self.norm_weight = nn.Parameter(torch.empty(d_in))
        self.out_proj = nn.Linear(d_in, cfg.d_model, bias=False)
        self.reset_parameters()

    @torch.no_grad()
    def reset_parameters(self, dt_min: float = 1e-3, dt_max: float = 0.1) -> None:
        k = self.cfg.mamba_d_conv
        nn.init.uniform_(self.conv1d.weight, -k ** -0.5, k ** -0.5)
        nn.init.uniform_(self.conv1d.bias, -k ** -0.5, k ** -0.5)
        dt = torch.exp(torch.rand_like(self.dt_bias) * (math.log(dt_max) - math.log(dt_min)) + math.log(dt_min))
        dt = dt.clamp(min=1e-4)
        self.dt_bias.copy_(dt + torch.log(-torch.expm1(-dt)))  # softplus(dt_bias) = dt
        self.A_log.copy_(torch.empty_like(self.A_log).uniform_(1, 16).log())
        self.D.fill_(1.0)
        self.norm_weight.fill_(1.0)

    def forward(self, u: torch.Tensor, seg=None) -> torch.Tensor:
        cfg, (b, T, _) = self.cfg, u.shape
        d_in, gn, nh = cfg.d_inner, cfg.mamba_n_groups * cfg.mamba_d_state, cfg.mamba_heads
        z, xbc, dt = self.in_proj(u).split([d_in, self.conv_dim, nh], dim=-1)
        xbc = F.silu(causal_conv1d(xbc, self.conv1d.weight[:, 0], self.conv1d.bias, seg))
        x, B, C = xbc.split([d_in, gn, gn], dim=-1)
        work = torch.promote_types(u.dtype, torch.float32)      # dt and A in float32 or wider
        dt = F.softplus(dt.to(work) + self.dt_bias.to(work))
        A = -torch.exp(self.A_log.to(work))
        y = ssd_scan(x.view(b, T, nh, -1), dt, A, B.view(b, T, cfg.mamba_n_groups, -1),
                     C.view(b, T, cfg.mamba_n_groups, -1), self.D, cfg.mamba_chunk_size, seg,
                     backend=cfg.ssd_backend).reshape(b, T, d_in)
        # gated RMSNorm, normalised per group (norm_before_gate=False in mamba_ssm's terms)
        g = (y * F.silu(z)).to(work).view(b, T, cfg.mamba_n_groups, -1)
        g = F.rms_norm(g, g.shape[-1:], eps=cfg.norm_eps).view(b, T, d_in) * self.norm_weight.to(work)
        return self.out_proj(g.to(u.dtype))


# -- attention --------------------------------------------------------------------------------

def _rope(x: torch.Tensor, pos: torch.Tensor, theta: float) -> torch.Tensor:
    """Rotate halves of x (b, h, t, d) by angles pos * theta^(-2i/d)."""
    d = x.shape[-1] // 2
    freqs = theta ** (-torch.arange(d, device=x.device, dtype=torch.float32) / d)
    ang = (pos.float().unsqueeze(-1) * freqs).unsqueeze(1)     # (b, 1, t, d/2)
    cos, sin = ang.cos().to(x.dtype), ang.sin().to(x.dtype)
    x1, x2 = x[..., :d], x[..., d:]
    return torch.cat([x1 * cos - x2 * sin, x1 * sin + x2 * cos], -1)


class Attention(nn.Module):
    """Grouped-query attention; causal, and within the document when a mask is given."""

    def __init__(self, cfg: ModelConfig):
        super().__init__()
        self.cfg, hd = cfg, cfg.attn_head_dim
        self.q_proj = nn.Linear(cfg.d_model, cfg.n_heads * hd, bias=False)
        self.k_proj = nn.Linear(cfg.d_model, cfg.n_kv_heads * hd, bias=False)
        self.v_proj = nn.Linear(cfg.d_model, cfg.n_kv_heads * hd, bias=False)
        self.o_proj = nn.Linear(cfg.n_heads * hd, cfg.d_model, bias=False)

    def forward(self, x: torch.Tensor, mask=None, pos=None) -> torch.Tensor:
        cfg, (b, T, _) = self.cfg, x.shape
        q = self.q_proj(x).view(b, T, cfg.n_heads, -1).transpose(1, 2)
        k = self.k_proj(x).view(b, T, cfg.n_kv_heads, -1).transpose(1, 2)
        v = self.v_proj(x).view(b, T, cfg.n_kv_heads, -1).transpose(1, 2)
        if cfg.rope_theta is not None:
            if pos is None:
                pos = torch.arange(T, device=x.device).expand(b, T)
            q, k = _rope(q, pos, cfg.rope_theta), _rope(k, pos, cfg.rope_theta)
        gqa = cfg.n_heads != cfg.n_kv_heads
        if mask is None:
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=gqa)
        else:
            y = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, enable_gqa=gqa)
        return self.o_proj(y.transpose(1, 2).reshape(b, T, -1))


def document_mask(seg: torch.Tensor) -> torch.Tensor:
    """(B, 1, T, T) boolean, True where query t may attend key s: s <= t and the same document."""
    T = seg.shape[1]
    causal = torch.ones(T, T, dtype=torch.bool, device=seg.device).tril()
    return (seg.unsqueeze(-1) == seg.unsqueeze(-2)).unsqueeze(1) & causal


# -- feed-forward -----------------------------------------------------------------------------

class MLP(nn.Module):
    """down(relu(up(x))^2): the squared-ReLU MLP of Nemotron-H."""

    def __init__(self, d: int, hidden: int):
        super().__init__()
        self.up = nn.Linear(d, hidden, bias=False)
        self.down = nn.Linear(hidden, d, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.down(F.relu(self.up(x)).square())


class MoE(nn.Module):
    """Top-k routed squared-ReLU experts plus an optional always-on shared expert.

    The router scores experts with a sigmoid (Nemotron 3) or a softmax; the k best are mixed with
    their scores renormalised to sum to 1. Dispatch is deterministic: assignments are sorted by
    expert (stable), each expert runs once on its contiguous block, and outputs return to their
    (token, slot) by a permutation, summed over the k slots in a fixed order (no atomics).
    `forward` returns (y, balance) where balance is the Switch loss n_experts * sum_i f_i P_i
    (f_i: share of assignments to expert i, P_i: mean normalised router score), 1 when balanced.
    """

    def __init__(self, cfg: ModelConfig):
        super().__init__()
        self.cfg = cfg
        E, d, H = cfg.n_experts, cfg.d_model, cfg.expert_hidden
        self.router = nn.Linear(d, E, bias=False)
        self.w_up = nn.Parameter(torch.randn(E, d, H) * cfg.init_std)     # HybridLM re-initialises all
        self.w_down = nn.Parameter(torch.randn(E, H, d) * cfg.init_std)
        self.shared = MLP(d, cfg.shared_expert_hidden or H) if cfg.shared_expert else None
        self.last_load: torch.Tensor | None = None     # (E,) share of the last batch's assignments

    def route(self, xf: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """(N, d) -> top-k weights (N, k), top-k experts (N, k), normalised scores (N, E)."""
        logits = self.router(xf).to(torch.promote_types(xf.dtype, torch.float32))
        if self.cfg.router == "sigmoid":
            scores = torch.sigmoid(logits)
            probs = scores / scores.sum(-1, keepdim=True)
        else:
            scores = probs = torch.softmax(logits, -1)
        w, idx = scores.topk(self.cfg.top_k, dim=-1)
        return w / w.sum(-1, keepdim=True), idx, probs

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        cfg, shape = self.cfg, x.shape
        xf = x.reshape(-1, shape[-1])
        N, E, k = xf.shape[0], cfg.n_experts, cfg.top_k
        w, idx, probs = self.route(xf)
        flat = idx.reshape(-1)                                       # assignment a = token * k + slot
        order = flat.argsort(stable=True)
        counts = torch.bincount(flat, minlength=E)
        xs = xf[order // k]
        outs, start = [], 0
        for e, n in enumerate(counts.tolist()):
            h = F.relu(xs[start:start + n] @ self.w_up[e]).square()
            outs.append(h @ self.w_down[e])
            start += n
        ys = torch.cat(outs)[order.argsort()].view(N, k, -1)        # back to assignment order
        y = (ys * w.to(ys.dtype).unsqueeze(-1)).sum(1)
        if self.shared is not None:
            y = y + self.shared(xf)
        load = counts.float() / (N * k)
        self.last_load = load.detach()
        balance = E * (load * probs.mean(0)).sum()
        return y.view(shape), balance


# -- the model --------------------------------------------------------------------------------

class Block(nn.Module):
    def __init__(self, cfg: ModelConfig, kind: str):
        super().__init__()
        self.kind = LAYER_KINDS[kind]
        self.norm_weight = nn.Parameter(torch.ones(cfg.d_model))
        self.eps = cfg.norm_eps
        self.mixer = {"mamba": Mamba2, "attention": Attention, "moe": MoE,
                      "mlp": lambda c: MLP(c.d_model, c.mlp_hidden)}[self.kind](cfg)

    def forward(self, x, seg=None, mask=None, pos=None):
        h = F.rms_norm(x, x.shape[-1:], self.norm_weight, self.eps)
        aux = None
        if self.kind == "mamba":
            h = self.mixer(h, seg)
        elif self.kind == "attention":
            h = self.mixer(h, mask, pos)
        elif self.kind == "moe":
            h, aux = self.mixer(h)
        else:
            h = self.mixer(h)
        return x + h, aux


class HybridLM(nn.Module):
    def __init__(self, cfg: ModelConfig):
        super().__init__()
        cfg.validate()          # the config is a plain dataclass; callers may have edited it
        self.cfg = cfg
        self.embed = nn.Embedding(cfg.vocab_size, cfg.d_model)
        self.layers = nn.ModuleList(Block(cfg, ch) for ch in cfg.pattern)
        self.norm_weight = nn.Parameter(torch.ones(cfg.d_model))
        self.lm_head = None if cfg.tie_embeddings else nn.Linear(cfg.d_model, cfg.out_vocab, bias=False)
        self.reset_parameters()

    @torch.no_grad()
    def reset_parameters(self) -> None:
        """Normal(0, init_std) weights, output projections scaled by 1/sqrt(2 * layers); Mamba's own
        dt/A/D init. Draws from torch's global RNG in module order: same seed, same parameters."""
        std = self.cfg.init_std
        out_std = std / math.sqrt(2 * len(self.layers))
        for name, p in self.named_parameters():
            if name.endswith("norm_weight"):
                p.fill_(1.0)
            elif name.endswith(("o_proj.weight", "out_proj.weight", "down.weight", "w_down")):
                nn.init.normal_(p, 0.0, out_std)
            elif p.dim() >= 2 and "conv1d" not in name:
                nn.init.normal_(p, 0.0, std)
        for m in self.modules():
            if isinstance(m, Mamba2):
                m.reset_parameters()

    def hidden(self, tokens: torch.Tensor, doc_ids=None, *, reset=None) -> tuple[torch.Tensor, torch.Tensor]:
        """Final-norm hidden states (B, T, d_model) and the weighted aux loss (for chunked losses)."""
        seg = segment_ids(doc_ids, reset)
        mask = pos = None
        if seg is not None and "*" in self.cfg.pattern:
            mask = document_mask(seg)
            if self.cfg.rope_theta is not None:
                pos = positions_in_segment(seg)
        x = self.embed(tokens)
        aux = torch.zeros((), device=x.device)
        for layer in self.layers:
            x, a = layer(x, seg, mask, pos)
            if a is not None:
                aux = aux + a
        x = F.rms_norm(x, x.shape[-1:], self.norm_weight, self.cfg.norm_eps)
        return x, self.cfg.aux_loss_coef * aux

    def head(self, h: torch.Tensor) -> torch.Tensor:
        w = self.lm_head.weight if self.lm_head is not None else self.embed.weight[:self.cfg.out_vocab]
        return F.linear(h, w)

    def forward(self, tokens: torch.Tensor, doc_ids=None, *, reset=None) -> tuple[torch.Tensor, torch.Tensor]:
        """tokens (B, T) int64, doc_ids (B, T) or None -> logits (B, T, out_vocab), aux loss (scalar,
        already times aux_loss_coef: add it to the loss as is)."""
        h, aux = self.hidden(tokens, doc_ids, reset=reset)
        return self.head(h), aux

    def expert_load(self) -> torch.Tensor:
        """(MoE layers, n_experts): each expert's share of the last forward's assignments."""
        loads = [b.mixer.last_load for b in self.layers if b.kind == "moe" and b.mixer.last_load is not None]
        return torch.stack(loads) if loads else torch.empty(0, self.cfg.n_experts)

    def num_params(self, exclude_embedding: bool = False) -> int:
        n = sum(p.numel() for p in self.parameters())
        return n - self.embed.weight.numel() if exclude_embedding else n

    def num_active_params(self) -> int:
        """Parameters one token uses: the unselected experts of every MoE layer left out."""
        c = self.cfg
        idle = (c.n_experts - c.top_k) * 2 * c.d_model * c.expert_hidden * c.pattern.count("E")
        return self.num_params() - idle
