"""`curate explain`: the phase table as planned for a recipe, with each source's composed step chains
and every node's fingerprint. It prints what will run, from the same composition the tasks build."""
from __future__ import annotations

from pathlib import Path

from curation.core.resources import Resources
from curation.plan.graph import Plan
from curation.plan.pipeline import drop_names, encoder_spec, process_chain


def chains(plan: Plan, source: str) -> tuple[list[str], list[str]]:
    """The names of a source's process and tokenize steps, as its tasks build them."""
    src = plan.recipe.source(source)
    nodes = [n for n in plan.process if n.source == source]
    comp = nodes[0].spec["compliance"] if nodes else None
    process = ["read"] + ([s.name for s in process_chain(src, comp, Path(nodes[0].spec["path"]),
                                                         plan.recipe.base_dir)] if comp else [])
    run = next((t.spec["run"] for t in plan.tokenize if t.source == source), None)
    tokenize = [step for step, _ in drop_names([p for p, _ in plan.phases], src)]
    tokenize += [encoder_spec(src, run).name] if run else ["tokenize"]
    return process, tokenize


def explain(plan: Plan, nodes: bool = False) -> str:
    """The plan for people; with `nodes`, one `key fingerprint resources` line per node (for scripts and
    tests; resources as `cpus=1,gpus=0`, `gpus=1` for a codec on CUDA, `gpus=auto` for one where there is one)."""
    if nodes:
        return "\n".join(f"{n.key} {n.fingerprint} {Resources.from_json(n.resources).describe()}"
                         for n in plan.nodes())
    r = plan.recipe
    lines = [f"recipe {r.recipe.name}  fingerprint {r.fingerprint}  vocabulary {plan.vocab.id}",
             f"stages: {', '.join(f'{s.name} (seq {s.seq_length})' for s in r.recipe.stages)}", ""]
    for src in r.recipe.sources:
        files = r.inputs[src.name]
        where = f" (acquired at run time: {src.acquire.kind} {src.acquire.path} → OUT/raw/{src.name}/)" \
            if src.acquire else ""
        lines.append(f"source {src.name} ({src.modality}): {len(files)} shard(s){where}, weight {src.weight}, "
                     f"category {src.category}")
        process, tokenize = chains(plan, src.name)
        lines.append(f"  process:  {' → '.join(process)}")
        lines.append(f"  tokenize: {' → '.join(tokenize)} → shards")
        for p, t in zip([n for n in plan.process if n.source == src.name],
                        [n for n in plan.tokenize if n.source == src.name]):
            lines.append(f"  shard {p.shard} {p.spec['rel']}")
            lines.append(f"    process  {p.fingerprint}")
            lines.append(f"    tokenize {t.fingerprint}  {Resources.from_json(t.resources).describe()}")
        lines.append(f"  merge      {next(n.fingerprint for n in plan.merge if n.source == src.name)}")
    lines += ["", "phase table, in run order:", f"  process    {len(plan.process)} task(s), one per input shard"]
    for phase, phase_nodes in plan.phases:
        covered = [s.name for s in r.recipe.sources if phase.covers(s)]
        lines.append(f"  {phase.name:<10} removes in `{phase.step}` from {', '.join(covered) or 'no source'}: "
                     f"{phase.explain(phase_nodes)}")
    lines += [f"  tokenize   {len(plan.tokenize)} task(s), one per input shard",
              f"  merge      {len(plan.merge)} task(s), one per source"]
    return "\n".join(lines)
