"""Long-context extension steps (Apertus 1.5 §3.3, Table 5, Appendix F): a fixed composition per step.

A step of `budget_tokens` B takes:
1. the cooldown subsample: `share` × B tokens from an earlier stage's mixture, split over that stage's
   sources by their planned shares, from short-context documents (at most `max_tokens`, default the
   native range's lower bound; Apertus 1.5 Appendix F: under 16,384 tokens);
2. the rest, B minus the subsample, split over the classes by their shares (Table 5's percentages). A class
   splits its tokens over its sources in proportion to each one's native pool (documents longer than
   `native_above` and at most the step's seq_length), "so that no single source dominates a step";
3. where a class's native pool falls short, its `top_up` draws documents of a short-context length range
   (Apertus: 1,000-16,384 tokens) from the same sources until the class reaches its tokens.

The classes draw before the subsample (a fixed class budget comes first where pools are small), each
class natively before its top-up. Every target is split into integers by largest remainder, so the parts add up to the whole exactly.
Each (source, part) takes whole documents in an order seeded by stage, source and part, each one that
brings it closer to its target (shorter than twice the tokens still missing): it ends within half a
document of the target unless the pool runs out. A document enters a step once. The selection
is packed into sequences with best-fit decreasing, as the long-context buckets are
(`curation.mixture.longcontext`). Every class is reported with its planned, native and topped-up tokens.
"""
from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from fractions import Fraction

import numpy as np

from curation.mixture.longcontext import LongContextPlan, best_fit_decreasing
from curation.recipe.stages import Extension

COOLDOWN = "cooldown"   # the class name of the cooldown subsample in the plan and the ledger


@dataclass
class ClassResult:
    stage: str
    name: str                    # the class, or COOLDOWN for the cooldown subsample
    share: float                 # asked: of the tokens beyond the subsample (the subsample: of the budget)
    planned_tokens: int
    native_tokens: int = 0       # documents of the native range (the subsample: all its documents)
    topup_tokens: int = 0        # short-context documents of the top-up range
    documents: int = 0
    lower: int = 0               # native range (lower exclusive, upper inclusive)
    upper: int = 0
    topup_range: tuple[int, int] | None = None
    by_source: dict[str, int] = field(default_factory=dict)
    # (source, part) -> the documents drawn: part "native", "top_up" or COOLDOWN
    picks: dict[tuple[str, str], np.ndarray] = field(default_factory=dict)

    @property
    def realised_tokens(self) -> int:
        return self.native_tokens + self.topup_tokens


def apportion(total: int, weights: list[float]) -> list[int]:
    """Split `total` into integers in proportion to `weights` (largest remainder, ties: the earlier).

    Exact fractions of the weights as written (0.171 is 171/1000), so a tie in the recipe's numbers is a
    tie here, not decided by float rounding."""
    w = [Fraction(str(x)) if isinstance(x, float) else Fraction(int(x)) for x in weights]
    s = sum(w)
    if total <= 0 or s <= 0:
        return [0] * len(w)
    exact = [total * x / s for x in w]
    out = [int(x) for x in exact]   # floor: every part is >= 0
    for i in sorted(range(len(w)), key=lambda i: (-(exact[i] - out[i]), i))[:total - sum(out)]:
        out[i] += 1
    return out


def _order(n: int, stage: str, source: str, part: str) -> np.ndarray:
    seed = int.from_bytes(hashlib.sha256(f"{stage}:{source}:{part}".encode()).digest()[:8], "little")
    return np.random.default_rng(seed).permutation(n)


def _take(stage: str, source: str, part: str, lens: np.ndarray, eligible: np.ndarray, chosen: np.ndarray,
          target: int) -> np.ndarray:
    """Indices of whole documents in the seeded order: each is taken when it brings the drawn tokens closer
    to `target` (it is shorter than twice the tokens still missing), so the draw ends within half a
    document of the target, or below it where the pool runs out."""
    got, picked = 0, []
    for i in _order(len(lens), stage, source, part):
        if got >= target:
            break
        if chosen[i] or not eligible[i] or lens[i] >= 2 * (target - got):
            continue
        chosen[i] = 1
        got += int(lens[i])
        picked.append(int(i))
    return np.asarray(sorted(picked), dtype=np.int64)


def _draw(res: ClassResult, part: str, sources: list[str], lo: int, hi: int, target: int,
          lengths: dict[str, np.ndarray], counts: dict[str, np.ndarray]) -> int:
    """Draw `target` tokens of documents of lo..hi tokens (inclusive) from `sources`, split in proportion
    to what each still holds in that range; returns the tokens drawn."""
    pools = [int(lengths[s][(lengths[s] >= lo) & (lengths[s] <= hi) & (counts[s] == 0)].sum()) for s in sources]
    drawn = 0
    for src, t in zip(sources, apportion(target, pools)):
        lens = lengths[src]
        got = _take(res.stage, src, f"{res.name}:{part}", lens, (lens >= lo) & (lens <= hi), counts[src], t)
        n = int(lens[got].sum())
        drawn += n
        res.documents += got.size
        res.by_source[src] = res.by_source.get(src, 0) + n
        res.picks[(src, part)] = got
    return drawn


def plan_extension(stage: str, seq_length: int, ext: Extension, native_above: int,
                   cooldown: tuple[dict[str, float], int] | None, lengths: dict[str, np.ndarray],
                   source_order: list[str]) -> tuple[LongContextPlan, list[ClassResult]]:
    """`cooldown`: (the subsampled stage's planned share per source, the longest document it may draw);
    `lengths`: per source, per-document token counts of the shards the step draws it from."""
    counts = {s: np.zeros(len(v), dtype=np.int32) for s, v in lengths.items()}
    results: list[ClassResult] = []
    budget = ext.budget_tokens
    sub = ext.cooldown_subsample
    # the classes draw first: each step has a fixed class budget (the image budget above all), and where a
    # pool is small the subsample must not take the short documents its top-up needs
    sub_tokens = int(round(sub.share * budget)) if sub is not None else 0
    rest = budget - sub_tokens
    names = list(ext.classes)
    for name, target in zip(names, apportion(rest, [ext.classes[c].share for c in names])):
        c = ext.classes[name]
        tr = (c.top_up.min_tokens, c.top_up.max_tokens) if c.top_up else None
        res = ClassResult(stage, name, c.share, target, lower=native_above, upper=seq_length, topup_range=tr)
        res.native_tokens = _draw(res, "native", c.sources, native_above + 1, seq_length, target, lengths, counts)
        if tr is not None and res.native_tokens < target:
            res.topup_tokens = _draw(res, "top_up", c.sources, tr[0], tr[1], target - res.native_tokens,
                                     lengths, counts)
        results.append(res)
    if sub is not None and cooldown is not None:
        shares, longest = cooldown
        names = [s for s in source_order if shares.get(s, 0) > 0]
        res = ClassResult(stage, COOLDOWN, sub.share, sub_tokens, lower=0, upper=longest)
        for src, target in zip(names, apportion(sub_tokens, [shares[s] for s in names])):
            lens = lengths[src]
            got = _take(stage, src, COOLDOWN, lens, lens <= longest, counts[src], target)
            n = int(lens[got].sum())
            res.native_tokens += n
            res.documents += got.size
            res.by_source[src] = res.by_source.get(src, 0) + n
            res.picks[(src, COOLDOWN)] = got
        results.insert(0, res)   # reported first, as Appendix F lists it
    items = [(int(lengths[s][i]), source_order.index(s), int(i))
             for s in source_order if s in counts for i in np.flatnonzero(counts[s])]
    packing, sequences = best_fit_decreasing(items, seq_length)
    tokens = sum(t[0] for t in items)
    plan = LongContextPlan(counts, [], packing, sequences, tokens / (sequences * seq_length) if sequences else 0.0)
    return plan, results
