"""Document segments and the Mamba-2 state-space-duality (SSD) scan, as plain functions.

`segment_ids` numbers the packed documents of each row; `ssd_chunked` is the chunked PyTorch scan
that zeroes the state at every document start, `ssd_reference` the step-by-step recurrence the
tests check it against, and `ssd_scan` the one place that picks mamba-ssm's CUDA kernel
(`mamba_chunk_scan_combined`, documents as `seq_idx`) when it is installed and the tensors are on
CUDA. `causal_conv1d` is Mamba-2's depthwise causal convolution without taps across documents.
"""
from __future__ import annotations

import functools
import math

import torch
import torch.nn.functional as F

# -- document segments ------------------------------------------------------------------------

def segment_ids(doc_ids: torch.Tensor | None = None, reset: torch.Tensor | None = None) -> torch.Tensor | None:
    """(B, T) int64 segment index per row, 0, 0, 1, 1, 1, 2, ...: +1 at every document start.

    A document starts where `doc_ids` differs from the previous position or where `reset` is True;
    the first position always starts one. The result is non-decreasing along each row, so
    "same segment at t and s" means "no document start in between". None when both are None.
    """
    if doc_ids is None and reset is None:
        return None
    ref = doc_ids if doc_ids is not None else reset
    start = torch.zeros(ref.shape, dtype=torch.bool, device=ref.device)
    if doc_ids is not None:
        start[:, 1:] = doc_ids[:, 1:] != doc_ids[:, :-1]
    if reset is not None:
        start |= reset.bool()
    start[:, 0] = False
    return start.long().cumsum(1)


def positions_in_segment(seg: torch.Tensor) -> torch.Tensor:
    """Position of each token within its document (0 at every document start)."""
    T = seg.shape[1]
    idx = torch.arange(T, device=seg.device).expand_as(seg)
    start = torch.ones_like(seg, dtype=torch.bool)
    start[:, 1:] = seg[:, 1:] != seg[:, :-1]
    return idx - torch.where(start, idx, torch.zeros_like(idx)).cummax(1).values


# -- Mamba-2 ----------------------------------------------------------------------------------

def _segsum(a: torch.Tensor) -> torch.Tensor:
    """(..., Q) -> (..., Q, Q): out[i, j] = a[j+1] + ... + a[i] for i >= j, -inf above the diagonal.

    Summed as a masked cumsum rather than as a difference of prefix sums, which loses precision."""
    Q = a.shape[-1]
    ones = torch.ones(Q, Q, dtype=torch.bool, device=a.device)
    s = a.unsqueeze(-1).expand(*a.shape, Q).masked_fill(~torch.tril(ones, -1), 0).cumsum(-2)
    return s.masked_fill(~torch.tril(ones), -math.inf)


def ssd_chunked(x, dt, A, B, C, chunk_size: int, seg: torch.Tensor | None = None) -> torch.Tensor:
    """The chunked SSD scan (state-space duality), without the D skip.

    x (b, l, h, p); dt (b, l, h) after softplus; A (h,) negative; B, C (b, l, g, n) with g dividing h;
    seg (b, l) non-decreasing segment ids or None. Computes h_t = exp(dt_t A) h_{t-1} + dt_t x_t B_t^T,
    y_t = h_t C_t, with h reset to 0 at every segment start. Lengths need not be a multiple of the chunk.
    """
    b, l, h, p = x.shape  # noqa: E741 - the SSD paper's (batch, length, heads, head dim)
    Q = min(chunk_size, l)
    pad = (-l) % Q
    if pad:   # zeros at the end: dt = 0 leaves the state alone and nothing earlier can see them
        x, dt, B, C = (F.pad(t, (0, 0) * (t.dim() - 2) + (0, pad)) for t in (x, dt, B, C))
        if seg is not None:
            seg = torch.cat([seg, seg[:, -1:].expand(b, pad)], 1)
    c = (l + pad) // Q
    rep = h // B.shape[2]
    Bh = B.repeat_interleave(rep, 2).view(b, c, Q, h, -1)
    Ch = C.repeat_interleave(rep, 2).view(b, c, Q, h, -1)
    xdt = (x * dt.unsqueeze(-1)).view(b, c, Q, h, p)
    a = (dt * A).view(b, c, Q, h).permute(0, 1, 3, 2)          # (b, c, h, Q) log-decay per step
    a_cum = a.cumsum(-1)

    decay = _segsum(a)                                         # (b, c, h, Q, Q)
    if seg is not None:
        sc = seg.view(b, c, Q)
        decay = decay.masked_fill((sc.unsqueeze(-1) != sc.unsqueeze(-2)).unsqueeze(2), -math.inf)
    # 1. within a chunk: y_l = sum_s (C_l . B_s) exp(a_{s+1} + ... + a_l) dt_s x_s
    scores = torch.einsum("bclhn,bcshn->bchls", Ch, Bh) * decay.exp()
    y = torch.einsum("bchls,bcshp->bclhp", scores, xdt)

    # 2. each chunk's end state, from its own positions of the chunk's last segment
    to_end = (a_cum[..., -1:] - a_cum).exp()                   # (b, c, h, Q)
    if seg is not None:
        to_end = to_end * (sc == sc[..., -1:]).unsqueeze(2)
    states = torch.einsum("bclhn,bclhp->bchpn", Bh * to_end.permute(0, 1, 3, 2).unsqueeze(-1), xdt)

    # 3. pass states between chunks: the state entering chunk z sums the end states of chunks < z
    totals = F.pad(a_cum[..., -1], (0, 0, 1, 0)).permute(0, 2, 1)   # (b, h, c + 1), 0 first
    passing = _segsum(totals)                                  # (b, h, c + 1, c + 1)
    if seg is not None:
        ends = torch.cat([seg[:, :1], sc[..., -1]], 1)         # segment at the end of chunk z - 1
        passing = passing.masked_fill((ends.unsqueeze(-1) != ends.unsqueeze(-2)).unsqueeze(1), -math.inf)
    states = torch.cat([torch.zeros_like(states[:, :1]), states], 1)
    entering = torch.einsum("bhzc,bchpn->bzhpn", passing.exp(), states)[:, :-1]

    # 4. the entering state's contribution, for positions still in the segment it belongs to
    y_prev = torch.einsum("bclhn,bchpn->bclhp", Ch, entering) * a_cum.exp().permute(0, 1, 3, 2).unsqueeze(-1)
    if seg is not None:
        y_prev = y_prev * (sc == ends[:, :-1].unsqueeze(-1)).view(b, c, Q, 1, 1)
    return (y + y_prev).reshape(b, c * Q, h, p)[:, :l]


def ssd_reference(x, dt, A, B, C, D=None, reset: torch.Tensor | None = None) -> torch.Tensor:
    """The SSD recurrence one step at a time (for tests); `reset` (b, l) zeroes the state first."""
    b, l, h, p = x.shape  # noqa: E741 - the SSD paper's (batch, length, heads, head dim)
    rep = h // B.shape[2]
    Bh, Ch = B.repeat_interleave(rep, 2), C.repeat_interleave(rep, 2)
    state = x.new_zeros(b, h, p, Bh.shape[-1])
    out = []
    for t in range(l):
        keep = torch.exp(dt[:, t] * A)                         # (b, h)
        if reset is not None:
            keep = keep * (~reset[:, t].bool()).unsqueeze(-1)
        state = state * keep[..., None, None] + (dt[:, t, :, None] * x[:, t]).unsqueeze(-1) * Bh[:, t, :, None, :]
        y = torch.einsum("bhpn,bhn->bhp", state, Ch[:, t])
        out.append(y if D is None else y + D[:, None] * x[:, t])
    return torch.stack(out, 1)


@functools.cache
def _mamba_kernel():
    try:
        from mamba_ssm.ops.triton.ssd_combined import mamba_chunk_scan_combined
    except Exception:        # not installed, or installed without a working CUDA/Triton build
        return None
    return mamba_chunk_scan_combined


def ssd_scan(x, dt, A, B, C, D, chunk_size: int, seg=None, backend: str = "auto") -> torch.Tensor:
    """The one place the SSD implementation is chosen: mamba_ssm's fused kernel for CUDA tensors
    when it imports (segments go in as `seq_idx`), otherwise `ssd_chunked` in float32 or wider."""
    kernel = _mamba_kernel() if backend != "torch" else None
    if backend == "kernel" and (kernel is None or not x.is_cuda):
        raise RuntimeError("ssd_backend 'kernel' needs CUDA tensors and an importable mamba_ssm")
    if kernel is not None and x.is_cuda:
        seq_idx = seg.to(torch.int32).contiguous() if seg is not None else None
        return kernel(x.contiguous(), dt.contiguous(), A, B.contiguous(), C.contiguous(), chunk_size,
                      D=D, seq_idx=seq_idx)
    work = torch.promote_types(x.dtype, torch.float32)
    x32 = x.to(work)
    y = ssd_chunked(x32, dt.to(work), A.to(work), B.to(work), C.to(work), chunk_size, seg)
    return (y + D.to(work)[:, None] * x32).to(x.dtype)


def causal_conv1d(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor, seg=None) -> torch.Tensor:
    """Depthwise causal conv over time, x (b, t, ch), weight (ch, k): y_t = bias + sum_j w[k-1-j] x_{t-j},
    a tap reaching into the previous document (segment) dropped."""
    k, T = weight.shape[1], x.shape[1]
    y = x * weight[:, k - 1] + bias
    for j in range(1, min(k, T)):
        term = F.pad(x[:, :T - j], (0, 0, j, 0)) * weight[:, k - 1 - j]
        if seg is not None:
            same = F.pad(seg[:, j:] == seg[:, :-j], (j, 0), value=False)
            term = term * same.unsqueeze(-1)
        y = y + term
    return y
