"""Mixture planning: from exact per-source token counts to each stage's epochs, effective tokens and shares.

For a stage with budget B (tokens of our vocabulary, all modalities):
1. sources with `epochs: e` take e × raw tokens (0 = enumerated but excluded; the row stays);
2. each category with a target share t gets t × B, less its fixed-epoch tokens, split over its
   weighted sources by weight;
3. what is left of B goes to the weighted sources of untargeted categories, by weight.
A stage without `mixture` takes every source with its recipe weight; without a budget, every
source with weight > 0 enters for one epoch.

Flags, raised before anything trains:
- `over_repetition`: a source needs more epochs than it may repeat (`max_epochs`). Blended
  proportionally it runs dry part-way: `exhausted_at_tokens` = (max_epochs × raw) / share, the
  stage token at which it is used up and the realised mixture starts to drift (Apertus 1.5, 3.4);
- `target_unreachable`: a category cannot reach its target share even at every source's
  `max_epochs`;
- `budget_exceeded`, `budget_unfilled`, `no_tokens`: the numbers do not close.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass, field

import numpy as np

from curation.mixture.extension import COOLDOWN, ClassResult, plan_extension
from curation.mixture.longcontext import LongContextPlan, plan_long_context
from curation.mixture.manifest_schema import training_json
from curation.mixture.variants import shard_variant
from curation.recipe.schema import MixtureEntry, Recipe, Source, Stage

EPS = 1e-9


@dataclass
class MixtureRow:
    stage: str
    source: str
    category: str
    raw_tokens: int
    documents: int
    epochs: float
    effective_tokens: int
    share: float
    target_share: float | None  # the source's category target in this stage, if any
    max_epochs: float
    exhausted_at_tokens: int | None
    excluded: str | None = None  # why a source has no tokens in this stage

    def as_row(self, run: str) -> dict:
        return {"run": run, **asdict(self)}


@dataclass
class StagePlan:
    stage: Stage
    budget_tokens: int
    rows: list[MixtureRow]
    flags: list[dict] = field(default_factory=list)
    long_context: LongContextPlan | None = None  # for long-context stages: buckets, selection, packing
    classes: list[ClassResult] = field(default_factory=list)  # for extension steps: per class, planned vs drawn

    def categories(self) -> list[dict]:
        out: dict[str, dict] = {}
        for r in self.rows:
            c = out.setdefault(r.category, {"stage": self.stage.name, "category": r.category, "effective_tokens": 0,
                                             "share": 0.0, "target_share": self.stage.category_targets.get(r.category)})
            c["effective_tokens"] += r.effective_tokens
            c["share"] += r.share
        return list(out.values())


def _entries(stage: Stage, sources: list[Source]) -> dict[str, MixtureEntry | None]:
    if stage.mixture is not None:
        return {s.name: stage.mixture.get(s.name) for s in sources}
    if stage.budget_tokens is None:
        return {s.name: MixtureEntry(epochs=1.0 if s.weight > 0 else 0.0) for s in sources}
    return {s.name: MixtureEntry(weight=s.weight) for s in sources}


def _split(budget: float, weights: dict[str, float]) -> dict[str, float]:
    total = sum(weights.values())
    return {k: budget * w / total for k, w in weights.items()} if total > 0 else {k: 0.0 for k in weights}


def plan_stage(stage: Stage, sources: list[Source], tokens: dict[str, int], documents: dict[str, int]) -> StagePlan:
    entries = _entries(stage, sources)
    flags: list[dict] = []
    eff: dict[str, float] = {}
    weighted: dict[str, float] = {}
    for s in sources:
        e = entries[s.name]
        if e is None:
            eff[s.name] = 0.0
        elif e.epochs is not None:
            eff[s.name] = e.epochs * tokens[s.name]
        elif tokens[s.name] == 0 and e.weight:
            flags.append({"stage": stage.name, "source": s.name, "kind": "no_tokens",
                          "message": f"{s.name} has weight {e.weight} but no tokens survived curation"})
            eff[s.name] = 0.0
        else:
            weighted[s.name] = e.weight or 0.0
    fixed = sum(eff.values())
    budget = stage.budget_tokens if stage.budget_tokens is not None else fixed
    if fixed > budget + EPS:
        flags.append({"stage": stage.name, "source": None, "kind": "budget_exceeded",
                      "message": f"fixed-epoch sources need {fixed:,.0f} tokens, more than the budget {budget:,}"})
    category = {s.name: s.category for s in sources}
    remaining = max(budget - fixed, 0.0)
    for cat, target in stage.category_targets.items():
        members = {k: w for k, w in weighted.items() if category[k] == cat}
        fixed_cat = sum(v for k, v in eff.items() if category[k] == cat)
        want = max(target * budget - fixed_cat, 0.0)
        if not members:
            want = 0.0
        eff.update(_split(want, members))
        remaining -= want
    rest = {k: w for k, w in weighted.items() if category[k] not in stage.category_targets}
    eff.update(_split(max(remaining, 0.0), rest))
    if remaining > EPS and not any(w > 0 for w in rest.values()) and stage.budget_tokens is not None:
        flags.append({"stage": stage.name, "source": None, "kind": "budget_unfilled",
                      "message": f"{remaining:,.0f} tokens of the budget have no weighted source to go to"})

    # shares are of the whole effective tokens the manifest states (what `curate verify` recomputes)
    effective_of = {k: int(round(v)) for k, v in eff.items()}
    total = sum(effective_of.values())
    rows = []
    for s in sources:
        e = entries[s.name]
        raw = tokens[s.name]
        max_ep = (e.max_epochs if e is not None and e.max_epochs is not None else s.max_epochs)
        effective = effective_of[s.name]
        share = effective / total if total > 0 else 0.0
        epochs = eff[s.name] / raw if raw else 0.0
        exhausted = None
        if e is not None and e.weight is not None and eff[s.name] > max_ep * raw + 0.5:
            exhausted = int(max_ep * raw / share) if share > 0 else 0
            flags.append({"stage": stage.name, "source": s.name, "kind": "over_repetition",
                          "message": f"{s.name} needs {epochs:.2f} epochs (allowed {max_ep:g}); blended "
                                     f"proportionally it runs out at token {exhausted:,} of {budget:,} "
                                     f"({100 * exhausted / max(budget, 1):.1f}% of the stage)"})
        excluded = None
        if e is None:
            excluded = "not in this stage's mixture"
        elif effective == 0:
            excluded = "0 epochs" if e.epochs == 0 else ("weight 0" if e.weight == 0 else "no tokens")
        rows.append(MixtureRow(stage.name, s.name, s.category, raw, documents[s.name], round(epochs, 6), effective,
                               round(share, 9), stage.category_targets.get(s.category), max_ep, exhausted, excluded))
    for cat, target in stage.category_targets.items():
        reachable = sum(r.max_epochs * r.raw_tokens for r in rows if r.category == cat
                        and entries[r.source] is not None and entries[r.source].weight is not None)
        reachable += sum(r.effective_tokens for r in rows if r.category == cat
                         and entries[r.source] is not None and entries[r.source].epochs is not None)
        if reachable + 0.5 < target * budget:
            flags.append({"stage": stage.name, "source": None, "kind": "target_unreachable",
                          "message": f"category {cat!r} targets {100 * target:.1f}% ({target * budget:,.0f} tokens) "
                                     f"but its sources hold at most {reachable:,.0f} within their allowed epochs "
                                     f"({100 * reachable / max(budget, 1):.1f}%)"})
    return StagePlan(stage, int(budget), rows, flags)


def plan_long_context_stage(stage: Stage, sources: list[Source], tokens: dict[str, int],
                            documents: dict[str, int], lengths: dict[str, np.ndarray]) -> StagePlan:
    lc = stage.long_context
    order = [s.name for s in sources]
    used = [s for s in order if s in lc.priority or s in lc.top_up]
    plan = plan_long_context(stage.name, stage.seq_length, lc.buckets, lc.targets, lc.priority, lc.top_up,
                             {s: lengths[s] for s in used}, order)
    selected = {s: int((plan.counts[s].astype(np.int64) * lengths[s]).sum()) if s in plan.counts else 0
                for s in order}
    total = sum(selected.values())
    rows = []
    for s in sources:
        raw = tokens[s.name]
        eff = selected[s.name]
        short = any(b.realised_tokens < b.target_tokens for b in plan.buckets)
        excluded = None if eff else ("not in this stage's priority or top_up" if s.name not in used
                                     else "no documents of a bucket's length" if short
                                     else "not needed: earlier sources filled the buckets")
        rows.append(MixtureRow(stage.name, s.name, s.category, raw, documents[s.name],
                               round(eff / raw, 6) if raw else 0.0, eff, round(eff / total, 9) if total else 0.0,
                               None, s.max_epochs, None, excluded))
    flags = [{"stage": stage.name, "source": None, "kind": "bucket_short",
              "message": f"bucket ({b.lower}, {b.upper}] reached {b.realised_tokens:,} of {b.target_tokens:,} "
                         f"tokens ({b.topup_tokens:,} from top-up)"}
             for b in plan.buckets if b.realised_tokens < b.target_tokens]
    return StagePlan(stage, total, rows, flags, plan)


def plan_extension_stage(stage: Stage, sources: list[Source], tokens: dict[str, int], documents: dict[str, int],
                         lengths: dict[str, np.ndarray], earlier: dict[str, StagePlan]) -> StagePlan:
    """An extension step (`curation.mixture.extension`): its cooldown subsample follows the planned shares
    of the stage it names, from documents of at most `max_tokens` (default: `native_above`); its native
    documents are longer than `native_above` (default: the seq_length of the stage it starts from)."""
    ext = stage.extension
    order = [s.name for s in sources]
    prev = earlier[ext.start_from].stage
    native_above = ext.native_above if ext.native_above is not None else prev.seq_length
    cooldown = None
    if ext.cooldown_subsample is not None:
        cool = earlier[ext.cooldown_subsample.stage]
        longest = ext.cooldown_subsample.max_tokens or native_above
        cooldown = ({r.source: r.share for r in cool.rows if r.effective_tokens > 0}, longest)
    used = set(cooldown[0]) if cooldown else set()
    used |= {s for c in ext.classes.values() for s in c.sources}
    plan, classes = plan_extension(stage.name, stage.seq_length, ext, native_above, cooldown,
                                   {s: lengths[s] for s in order if s in used}, order)
    selected = {s: int((plan.counts[s].astype(np.int64) * lengths[s]).sum()) if s in plan.counts else 0
                for s in order}
    total = sum(selected.values())
    rows = []
    for s in sources:
        raw, eff = tokens[s.name], selected[s.name]
        excluded = None if eff else ("not in this step's classes or cooldown subsample" if s.name not in used
                                     else "no documents of a range this step draws")
        rows.append(MixtureRow(stage.name, s.name, s.category, raw, documents[s.name],
                               round(eff / raw, 6) if raw else 0.0, eff, round(eff / total, 9) if total else 0.0,
                               None, s.max_epochs, None, excluded))
    flags = [{"stage": stage.name, "source": None, "kind": "class_short",
              "message": f"{'the cooldown subsample' if c.name == COOLDOWN else 'class ' + repr(c.name)} reached "
                         f"{c.realised_tokens:,} of {c.planned_tokens:,} planned tokens ({c.native_tokens:,} native, "
                         f"{c.topup_tokens:,} topped up)"}
             for c in classes if c.realised_tokens < c.planned_tokens]
    return StagePlan(stage, total, rows, flags, plan, classes)


def plan_recipe(recipe: Recipe, tokens: dict[str, int], documents: dict[str, int],
                lengths: Callable[..., np.ndarray] | None = None) -> list[StagePlan]:
    """Plan every stage; `lengths(source)` gives per-document token counts of a source's main shards and
    `lengths(source, suffix)` those of another shard set (`curation.mixture.variants`). Long-context stages
    and stages that draw a source from another shard set need it; `tokens`/`documents` are the main shards'."""
    plans = []
    for st in recipe.stages:
        variant = {s.name: shard_variant(st, s) for s in recipe.sources}
        if any(variant.values()) and lengths is None:
            raise ValueError(f"stage {st.name} draws sources from other shard sets: pass `lengths`")
        lens = {s.name: (lengths(s.name, variant[s.name]) if variant[s.name] else
                         lengths(s.name) if st.packed_selection else None) for s in recipe.sources}
        st_tokens = {k: int(lens[k].astype(np.int64).sum()) if variant[k] else tokens[k] for k in tokens}
        st_docs = {k: int(lens[k].size) if variant[k] else documents[k] for k in documents}
        if st.extension is not None:
            plans.append(plan_extension_stage(st, recipe.sources, st_tokens, st_docs, lens,
                                              {p.stage.name: p for p in plans}))
        elif st.long_context is not None:
            plans.append(plan_long_context_stage(st, recipe.sources, st_tokens, st_docs, lens))
        else:
            plans.append(plan_stage(st, recipe.sources, st_tokens, st_docs))
    return plans


def mark_inclusion(source_rows: list[dict], plans: list[StagePlan]) -> None:
    """A source is included when some stage gives it tokens; otherwise the row says why not."""
    for row in source_rows:
        mine = [r for p in plans for r in p.rows if r.source == row["source"]]
        row["included"] = any(r.effective_tokens > 0 for r in mine)
        if not row["included"]:
            reasons = sorted({r.excluded or "no tokens" for r in mine})
            row["excluded_reason"] = ("no documents survived curation" if all(r.raw_tokens == 0 for r in mine)
                                      else "; ".join(reasons))


def ledger_rows(plans: list[StagePlan], run: str) -> dict[str, list[dict]]:
    """The `mixture` and `mixture_flags` ledger tables of a run."""
    return {
        "mixture": [r.as_row(run) for p in plans for r in p.rows],
        "mixture_flags": [{"run": run, **f} for p in plans for f in p.flags],
        "stages": [{"run": run, "stage": p.stage.name, "seq_length": p.stage.seq_length,
                    "budget_tokens": p.budget_tokens, "training": training_json(p.stage.training(i))}
                   for i, p in enumerate(plans)],
        "buckets": [{"run": run, "stage": b.stage, "bucket": b.bucket, "lower": b.lower, "upper": b.upper,
                     "target_tokens": b.target_tokens, "filled_tokens": b.filled_tokens,
                     "topup_tokens": b.topup_tokens, "realised_tokens": b.realised_tokens,
                     "documents": b.documents,
                     "sources": ", ".join(f"{k}={v}" for k, v in b.by_source.items())}
                    for p in plans if p.long_context for b in p.long_context.buckets],
        "lc_classes": [class_row(c, p.stage, run) for p in plans for c in p.classes],
    }


def class_row(c: ClassResult, stage: Stage, run: str) -> dict:
    """One `lc_classes` row: an extension step's class (or its cooldown subsample), planned vs drawn."""
    return {"run": run, "stage": c.stage, "start_from": stage.extension.start_from, "seq_length": stage.seq_length,
            "class": c.name, "share": c.share, "planned_tokens": c.planned_tokens, "native_tokens": c.native_tokens,
            "topup_tokens": c.topup_tokens, "realised_tokens": c.realised_tokens, "documents": c.documents,
            "native_lower": c.lower, "native_upper": c.upper,
            "topup_min": c.topup_range[0] if c.topup_range else None,
            "topup_max": c.topup_range[1] if c.topup_range else None,
            "sources": ", ".join(f"{k}={v}" for k, v in c.by_source.items())}
