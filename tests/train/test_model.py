"""The hybrid model: SSD scan against its recurrence, causality, document isolation, MoE routing, training."""
from __future__ import annotations

import importlib.util

import pytest
import torch
import torch.nn.functional as F

from curation.errors import RecipeError
from curation.train.model import HybridLM, Mamba2, ModelConfig, MoE
from curation.train.ssd import (
    causal_conv1d,
    segment_ids,
    ssd_chunked,
    ssd_reference,
    ssd_scan,
)

V = 97


def small(**kw) -> ModelConfig:
    """All four layer kinds, two Mamba groups, chunks of 16, a small vocabulary."""
    base = dict(vocab_size=V, d_model=32, pattern="M*E-M*E", n_heads=4, n_kv_heads=2, mamba_d_state=8,
                mamba_head_dim=8, mamba_expand=2, mamba_n_groups=2, mamba_chunk_size=16, mlp_hidden=64,
                n_experts=4, top_k=2, expert_hidden=32)
    return ModelConfig(**{**base, **kw})


def build(cfg: ModelConfig, seed: int = 0, dtype=torch.float64) -> HybridLM:
    torch.manual_seed(seed)
    return HybridLM(cfg).to(dtype).eval()


def ssd_inputs(b, l, h, p, g, n, dtype=torch.float64, seed=0):  # noqa: E741 - ssd_scan's shape names
    gen = torch.Generator().manual_seed(seed)
    x = torch.randn(b, l, h, p, generator=gen, dtype=dtype)
    dt = F.softplus(torch.randn(b, l, h, generator=gen, dtype=dtype) - 1)
    A = -torch.rand(h, generator=gen, dtype=dtype) * 2 - 0.05
    B = torch.randn(b, l, g, n, generator=gen, dtype=dtype)
    C = torch.randn(b, l, g, n, generator=gen, dtype=dtype)
    D = torch.randn(h, generator=gen, dtype=dtype)
    return x, dt, A, B, C, D


# -- the SSD scan -----------------------------------------------------------------------------

@pytest.mark.parametrize("chunk", [1, 4, 16, 64])
@pytest.mark.parametrize("length", [1, 13, 48, 70])
def test_chunked_ssd_matches_recurrence(chunk, length):
    x, dt, A, B, C, D = ssd_inputs(2, length, 4, 3, 2, 5)
    assert torch.allclose(ssd_chunked(x, dt, A, B, C, chunk) + D[:, None] * x,
                          ssd_reference(x, dt, A, B, C, D), atol=1e-10, rtol=0)
    # document starts: random ones, one on a chunk boundary, one just after it
    reset = torch.rand(2, length, generator=torch.Generator().manual_seed(1)) < 0.15
    for t in (chunk, chunk + 1):
        if t < length:
            reset[0, t] = True
    y = ssd_scan(x, dt, A, B, C, D, chunk, segment_ids(reset=reset), backend="torch")
    assert torch.allclose(y, ssd_reference(x, dt, A, B, C, D, reset), atol=1e-10, rtol=0)


def test_segments_from_doc_ids_or_resets():
    doc = torch.tensor([[7, 7, 3, 3, 3, 7, 9], [1, 1, 1, 1, 1, 1, 1]])
    seg = segment_ids(doc)
    assert seg.tolist() == [[0, 0, 1, 1, 1, 2, 3], [0] * 7]
    assert torch.equal(segment_ids(reset=torch.cat([torch.ones(2, 1), torch.diff(doc, dim=1) != 0], 1)), seg)
    assert segment_ids() is None


def test_causal_conv_is_a_causal_conv1d_and_stops_at_documents():
    gen = torch.Generator().manual_seed(0)
    x, w, bias = torch.randn(2, 20, 6, generator=gen), torch.randn(6, 4, generator=gen), torch.randn(6, generator=gen)
    want = F.conv1d(x.transpose(1, 2), w.unsqueeze(1), bias, padding=3, groups=6)[..., :20].transpose(1, 2)
    assert torch.allclose(causal_conv1d(x, w, bias), want, atol=1e-5)
    doc = torch.tensor([[0] * 9 + [1] * 11] * 2)
    y = causal_conv1d(x, w, bias, segment_ids(doc))
    assert torch.allclose(y[:, 9:], causal_conv1d(x[:, 9:], w, bias), atol=1e-6)
    assert torch.allclose(y[:, :9], want[:, :9], atol=1e-5)


# -- the model --------------------------------------------------------------------------------

def test_causality():
    model = build(small())
    tokens = torch.randint(0, V, (2, 50), generator=torch.Generator().manual_seed(0))
    changed = tokens.clone()
    changed[:, 23] = (changed[:, 23] + 1) % V
    with torch.no_grad():
        a, b = model(tokens)[0], model(changed)[0]
    assert torch.allclose(a[:, :23], b[:, :23], atol=1e-10, rtol=0)
    assert not torch.allclose(a[:, 23:], b[:, 23:], atol=1e-6)      # the change is seen from t on


@pytest.mark.parametrize("pattern,rope", [("M", None), ("*", None), ("*", 1e4), ("E", None), ("-", None),
                                          ("M*E-M*E", None), ("M*E-M*E", 1e4)])
@pytest.mark.parametrize("first_len", [37, 32])    # a start inside a chunk, and on a chunk boundary
def test_documents_do_not_see_each_other(pattern, rope, first_len):
    model = build(small(pattern=pattern, rope_theta=rope))
    gen = torch.Generator().manual_seed(0)
    doc1, doc2 = torch.randint(0, V, (2, first_len), generator=gen), torch.randint(0, V, (2, 45), generator=gen)
    other1 = torch.randint(0, V, (2, first_len), generator=gen)
    ids = torch.tensor([0] * first_len + [1] * 45).expand(2, -1)
    with torch.no_grad():
        alone = model(doc2, torch.zeros(2, 45, dtype=torch.long))[0]
        after1 = model(torch.cat([doc1, doc2], 1), ids)[0][:, first_len:]
        after_other = model(torch.cat([other1, doc2], 1), ids)[0][:, first_len:]
        unmasked = model(torch.cat([doc1, doc2], 1))[0][:, first_len:]
    assert torch.allclose(after1, alone, atol=1e-9, rtol=0)
    assert torch.allclose(after_other, alone, atol=1e-9, rtol=0)
    if pattern not in "E-":    # without doc_ids, sequence mixers do carry document 1 into document 2
        assert not torch.allclose(unmasked, alone, atol=1e-6)


def test_rope_restarts_per_document():
    model = build(small(pattern="*", rope_theta=10000.0))
    tokens = torch.randint(0, V, (1, 30), generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        alone = model(tokens[:, 10:], torch.zeros(1, 20, dtype=torch.long))[0]
        packed = model(tokens, torch.tensor([[0] * 10 + [1] * 20]))[0][:, 10:]
    assert torch.allclose(packed, alone, atol=1e-9, rtol=0)


def test_moe_routing_and_balance_loss():
    cfg = small()
    torch.manual_seed(0)
    moe = MoE(cfg).double()
    torch.nn.init.normal_(moe.w_up, std=0.1)
    torch.nn.init.normal_(moe.w_down, std=0.1)
    x = torch.randn(4, 25, cfg.d_model, dtype=torch.float64)
    xf = x.reshape(-1, cfg.d_model)
    for router in ("sigmoid", "softmax"):
        moe.cfg = small(router=router)
        torch.nn.init.zeros_(moe.router.weight)               # uniform scores: balance loss is exactly 1
        _, balance = moe(x)
        assert balance.item() == pytest.approx(1.0, abs=1e-6)
        torch.nn.init.normal_(moe.router.weight, std=1e-3)    # near-uniform routing
        y, balance = moe(x)
        assert balance.item() >= 1.0 - 1e-3
        w, idx, _ = moe.route(xf)
        assert idx.shape == (100, cfg.top_k) and all(len(set(r)) == cfg.top_k for r in idx.tolist())
        assert torch.allclose(w.sum(-1), torch.ones(100, dtype=w.dtype))
        assert moe.last_load.sum().item() == pytest.approx(1.0) and moe.last_load.shape == (cfg.n_experts,)
        # the dispatched result equals a dense mix of the chosen experts
        want = moe.shared(xf).clone()
        for t in range(100):
            for j in range(cfg.top_k):
                e = idx[t, j]
                want[t] += w[t, j] * (F.relu(xf[t] @ moe.w_up[e]).square() @ moe.w_down[e])
        assert torch.allclose(y.reshape(-1, cfg.d_model), want, atol=1e-10)
    with torch.no_grad():                                     # every token prefers expert 0
        moe.router.weight.zero_()
        moe.router.weight[0, 0] = 1.0
    skewed_x = x.clone()
    skewed_x[..., 0] = 10.0
    _, skewed = moe(skewed_x)
    assert moe.last_load[0].item() == pytest.approx(1 / cfg.top_k) and skewed.item() > 1.5


def test_output_vocab_restricts_the_head():
    for tie in (False, True):
        model = build(small(output_vocab=50, tie_embeddings=tie))
        logits, aux = model(torch.randint(0, V, (3, 20)), torch.zeros(3, 20, dtype=torch.long))
        assert logits.shape == (3, 20, 50) and aux.dim() == 0
    assert build(small()).forward(torch.zeros(1, 5, dtype=torch.long))[0].shape == (1, 5, V)
    with pytest.raises(RecipeError, match="output_vocab"):
        small(output_vocab=V + 1)
    with pytest.raises(RecipeError, match="pattern"):
        small(pattern="MXE")


@pytest.mark.slow
def test_overfits_a_repeated_sequence():
    torch.manual_seed(0)
    model = HybridLM(small())
    seq = torch.tensor([3, 14, 15, 92, 65, 35, 89, 79] * 8).expand(4, -1)
    inputs, labels = seq[:, :-1], seq[:, 1:]
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    losses = []
    for _ in range(30):
        logits, aux = model(inputs, torch.zeros_like(inputs))
        loss = F.cross_entropy(logits.reshape(-1, V), labels.reshape(-1))
        opt.zero_grad()
        (loss + aux).backward()
        opt.step()
        losses.append(loss.item())
    assert losses[0] > 4.0 and losses[-1] < 0.2 * losses[0], losses


def test_same_seed_same_model():
    cfg = small()
    a, b, c = build(cfg, 0, torch.float32), build(cfg, 0, torch.float32), build(cfg, 1, torch.float32)
    assert all(torch.equal(p, q) for p, q in zip(a.state_dict().values(), b.state_dict().values()))
    assert not torch.equal(a.embed.weight, c.embed.weight)
    tokens = torch.randint(0, V, (2, 40), generator=torch.Generator().manual_seed(0))
    assert torch.equal(a(tokens)[0], b(tokens)[0])
    n = a.num_params()
    assert n == sum(p.numel() for p in a.parameters()) and a.num_active_params() < n


def test_tiny_config_builds():
    cfg = ModelConfig.tiny(vocab_size=512)
    assert cfg.pattern.count("M") == cfg.pattern.count("E") and cfg.router == "sigmoid"
    torch.manual_seed(0)
    logits, _ = HybridLM(cfg)(torch.randint(0, 512, (1, 70)))
    assert logits.shape == (1, 70, 512)


_KERNEL_MISSING = (not torch.cuda.is_available() and "no CUDA device") or \
                  (importlib.util.find_spec("mamba_ssm") is None and "mamba_ssm is not installed")


@pytest.mark.skipif(bool(_KERNEL_MISSING), reason=f"mamba_ssm kernel agreement needs CUDA and mamba_ssm: "
                                                   f"{_KERNEL_MISSING}")
def test_mamba_ssm_kernel_agrees_with_torch_path():
    x, dt, A, B, C, D = (t.float().cuda() for t in ssd_inputs(2, 300, 4, 16, 2, 16))
    doc = torch.tensor([0] * 100 + [1] * 37 + [2] * 163).expand(2, -1).cuda()
    seg = segment_ids(doc)
    for s in (None, seg):
        want = ssd_scan(x, dt, A, B, C, D, 64, s, backend="torch")
        got = ssd_scan(x, dt, A, B, C, D, 64, s, backend="kernel")
        assert torch.allclose(got, want, atol=2e-3, rtol=2e-3)
    torch.manual_seed(0)
    layer = Mamba2(small(mamba_head_dim=16, mamba_d_state=16)).cuda()
    u = torch.randn(2, 300, 32, device="cuda")
    want = layer(u, seg)
    layer.cfg = small(mamba_head_dim=16, mamba_d_state=16, ssd_backend="kernel")
    assert torch.allclose(layer(u, seg), want, atol=2e-3, rtol=2e-3)
