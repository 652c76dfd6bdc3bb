"""Upper bounds on what a recipe may ask for, so `curate validate` catches what would otherwise run out
of memory or overflow hours later (a budget of 1e30 tokens, 10^8 MinHash bands, a plan of 10^8 tasks).

Each bound is far above any real run and says why it is where it is:
- MAX_TOKENS = 2^53: token budgets and targets. The largest integer a float64 holds exactly; the
  mixture planner multiplies budgets by float shares, and the ledger stores int64 sums of them.
- MAX_EPOCHS = 1000, MAX_WEIGHT = 1e6: repetition and blending weights (ratios; larger ones are typos).
- MAX_PERMUTATIONS = 2048: MinHash bands × rows. datatrove uses 14 × 8 = 112; `signature()` holds a
  shingles × permutations uint64 matrix per document (10k shingles × 2048 = 160 MiB).
- MAX_SEED = 2^32 - 1: numpy's RandomState (the MinHash permutations) takes no larger seed.
- MAX_PLAN_NODES = 500,000 task nodes in the plan, estimated by `plan_nodes` before anything is
  built; the driver holds every node with its spec (3.4 KB each measured on the demo plan with
  tracemalloc, so ~1.7 GB at the bound) and submits each as a task. 80k input files plan ~400k nodes
  (process, exact keys, signatures, decontamination, tokenize per file).
"""
from __future__ import annotations

from curation.errors import RecipeError

MAX_TOKENS = 2**53
MAX_EPOCHS = 1000.0
MAX_WEIGHT = 1e6
MAX_PERMUTATIONS = 2048
MAX_SEED = 2**32 - 1
MAX_SEQ_LENGTH = 2**20
MAX_PLAN_NODES = 500_000


def plan_nodes(recipe, files: dict[str, int]) -> dict[str, int]:
    """Task nodes the plan builds for a `Recipe`, by phase, for `files` input files per source (sources
    absent from `files`, e.g. not yet acquired, count 0). Mirrors the phase table
    (`curation.plan.phases`): process + tokenize per file, one merge per source; exact dedup keys per
    file, hash ranges and one resolution per modality; image and audio near-duplicates one each; with
    MinHash, signatures per text or interleaved file + bands × partitions + clusters; with
    decontamination, index + match per file + resolve; with `select`, scores per file of the selected
    sources + one resolve per pool."""
    total = sum(files.get(s.name, 0) for s in recipe.sources)
    text = sum(files.get(s.name, 0) for s in recipe.sources if s.modality in ("text", "interleaved"))
    modalities = {s.modality for s in recipe.sources}
    out = {"process": total, "tokenize": total, "merge": len(recipe.sources),
           "image_near": int(bool({"image", "interleaved"} & modalities)), "audio_near": int("audio" in modalities)}
    exact = recipe.dedup.exact
    if exact is not None:   # keys per file, hash ranges and one resolution per modality (`corpus.exact`)
        per = [sum(files.get(s.name, 0) for s in recipe.sources if s.modality == m) for m in sorted(modalities)]
        out["exact"] = total + sum(exact.partitions or max(1, min(n, 1024)) for n in per) + len(modalities)
    out = {k: v for k, v in out.items() if v}
    mh = recipe.dedup.minhash
    if mh is not None:
        bands, _ = mh.lsh()
        out |= {"signatures": text, "band": bands * mh.partitions, "clusters": 1}
    if recipe.decontamination is not None:
        out |= {"decont": total + 2}
    selected = [s for s in recipe.sources if s.select is not None]
    if selected:
        out |= {"select": sum(files.get(s.name, 0) for s in selected) + len({s.select.pool for s in selected})}
    return out


def check_plan_size(recipe, files: dict[str, int], where: str) -> int:
    """Raise a RecipeError naming the largest phases when the plan would exceed MAX_PLAN_NODES."""
    nodes = plan_nodes(recipe, files)
    n = sum(nodes.values())
    if n > MAX_PLAN_NODES:
        top = ", ".join(f"{k} {v:,}" for k, v in sorted(nodes.items(), key=lambda kv: -kv[1])[:3])
        raise RecipeError(f"{where}: the plan would hold {n:,} tasks ({top}), more than {MAX_PLAN_NODES:,}; "
                          f"merge small input files into larger shards, lower dedup.minhash bands or "
                          f"partitions, or split the recipe")
    return n

