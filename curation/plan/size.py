"""The plan's size before it is built: each phase counts the nodes it would plan (`node_count`, beside
its `plan`), so a recipe whose plan would exceed `MAX_PLAN_NODES` (`curation.recipe.limits`) is refused
before any node exists, with the phases that make it large. The record pipeline (process and tokenize
per input file, one merge per source) is counted here, with the phase table it surrounds."""
from __future__ import annotations

from curation.errors import RecipeError
from curation.plan.phases import applied
from curation.recipe import limits


def plan_nodes(recipe, files: dict[str, int]) -> dict[str, int]:
    """Task nodes of the plan of a `Recipe` by phase, for `files` input files per source (a source absent
    from `files`, e.g. not yet acquired, counts 0)."""
    total = sum(files.get(s.name, 0) for s in recipe.sources)
    counts = {"process": total, "tokenize": total, "merge": len(recipe.sources)}
    counts |= {phase.name: phase.node_count(recipe, files) for phase in applied(recipe)}
    return {k: v for k, v in counts.items() if v}


def check_plan_size(recipe, files: dict[str, int], where: str) -> int:
    """Raise a RecipeError naming the largest phases when the plan would exceed MAX_PLAN_NODES."""
    nodes = plan_nodes(recipe, files)
    n = sum(nodes.values())
    if n > limits.MAX_PLAN_NODES:
        top = ", ".join(f"{k} {v:,}" for k, v in sorted(nodes.items(), key=lambda kv: -kv[1])[:3])
        raise RecipeError(f"{where}: the plan would hold {n:,} tasks ({top}), more than {limits.MAX_PLAN_NODES:,}; "
                          f"merge small input files into larger shards, lower dedup.minhash bands or "
                          f"partitions, or split the recipe")
    return n
