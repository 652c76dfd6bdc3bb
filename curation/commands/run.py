"""`curate run`: plan a recipe, execute its phases on Ray, then write ledger, manifests and report."""
from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path

from curation.core.extras import require
from curation.core.markers import read_marker
from curation.core.vocab import Vocabulary
from curation.corpus import minhash as minhash_tasks
from curation.corpus.decont import phase as decont_tasks
from curation.ledger import build_rows, write_ledger
from curation.mixture.manifests import build_manifests
from curation.mixture.planning import ledger_rows as mixture_ledger_rows
from curation.mixture.planning import mark_inclusion, plan_recipe
from curation.plan.graph import Node, Plan, build_plan
from curation.recipe import load_recipe
from curation.runtime import tasks
from curation.runtime.ray_executor import RayRuntime
from curation.shards import read_index
from curation.train.writeback import previous_consumed


@dataclass
class RunResult:
    out: Path
    plan: Plan
    rows: dict
    manifests: list[Path]
    report: Path
    executed: int
    skipped: int


def load_plan(recipe_path: str | Path, raw_root: Path | None = None) -> Plan:
    loaded = load_recipe(recipe_path, raw_root=raw_root)
    for modality, extra in (("image", "images"), ("audio", "audio")):
        if any(s.modality == modality for s in loaded.recipe.sources):
            require(extra, f"{modality} sources")
    vocab = Vocabulary.load(loaded.resolve(loaded.recipe.vocabulary))
    vocab.tokenizer  # noqa: B018 - fail before any work if the tokenizer does not fit the vocabulary
    return build_plan(loaded, vocab)


def _current(out: Path, node: Node) -> dict | None:
    marker = read_marker(out, node.key, node.fingerprint)
    if marker and all((out / p).exists() for p in marker.get("outputs", [])):
        return marker
    return None


def run(recipe_path: str | Path, out: str | Path, *, workers: int | None = None, address: str | None = None,
        progress: bool = True, resolver=None) -> RunResult:
    """`resolver`: host name -> addresses for the network guard (default: the system's; tests inject one)."""
    out = Path(out).resolve()
    out.mkdir(parents=True, exist_ok=True)
    early = load_recipe(recipe_path, resolve_inputs=False)
    if any(s.acquire for s in early.recipe.sources):
        from curation.acquire.sources import acquire_all
        acquire_all(early, out / "raw", resolver=resolver)
    plan = load_plan(recipe_path, raw_root=out / "raw")
    markers: dict[str, dict] = {}
    counts = {"executed": 0, "skipped": 0}
    shard_order = [(n.source, n.shard) for n in plan.process]

    def phase(rt: RayRuntime, nodes: list[Node], fn, extra=()) -> None:
        todo = []
        for n in nodes:
            m = _current(out, n)
            if m is not None:
                markers[n.key] = m
            else:
                todo.append((n.key, (str(out), n.key, n.fingerprint, n.spec, *extra)))
        counts["skipped"] += len(nodes) - len(todo)
        counts["executed"] += len(todo)
        if todo:
            markers.update(rt.map(fn, todo, nodes[0].phase))

    # what tasks open by path on whichever node runs them
    inputs = [plan.recipe.path, plan.vocab.path, plan.vocab.text_tokenizer_path,
              *(f.path for fs in plan.recipe.inputs.values() for f in fs)]
    with RayRuntime(workers=workers, address=address, progress=progress, out=out, inputs=inputs) as rt:
        phase(rt, plan.process, tasks.run_process)
        phase(rt, [plan.dedup], tasks.run_dedup, (shard_order,))
        if plan.clusters is not None:
            phase(rt, plan.signatures, minhash_tasks.run_signatures)
            near_order = [(n.source, n.shard) for n in plan.signatures]  # text shards only
            phase(rt, plan.bands, minhash_tasks.run_band, (near_order,))
            phase(rt, [plan.clusters], minhash_tasks.run_clusters, (near_order,))
        if plan.decont_resolve is not None:
            phase(rt, [plan.decont_index], decont_tasks.run_decont_index)
            phase(rt, plan.decont, decont_tasks.run_decont)
            phase(rt, [plan.decont_resolve], decont_tasks.run_decont_resolve, (shard_order,))
        phase(rt, plan.tokenize, tasks.run_tokenize)
        phase(rt, plan.merge, tasks.run_merge)

    rows = build_rows(plan, markers, out)
    tokens = {t["source"]: t["total_tokens"] for t in rows["tokens"]}
    docs = {t["source"]: t["documents"] for t in rows["tokens"]}
    stage_plans = plan_recipe(plan.recipe.recipe, tokens, docs,
                              lengths=lambda s: read_index(Path(f"{tasks.source_prefix(out, s)}.idx"))[1])
    mark_inclusion(rows["sources"], stage_plans)
    rows.update(mixture_ledger_rows(stage_plans, plan.recipe.fingerprint))
    rows["consumed"] = previous_consumed(out / "ledger")   # training write-backs outlive re-runs
    write_ledger(rows, out / "ledger")
    manifests = build_manifests(plan, stage_plans, rows, out)
    from curation.report import write_report
    report = write_report(rows, out)
    refused: dict[str, list[int]] = {}
    for a in rows.get("acquisition", []):
        n = refused.setdefault(a["source"], [0, 0])
        n[0] += a["items"] if a["outcome"] == "refused" else 0
        n[1] += a["items"]
    for source, (bad, total) in refused.items():
        if bad:
            print(f"acquisition: {source}: {bad} of {total} item(s) refused by the network guard "
                  f"({100 * bad / total:.1f}%); reasons in the ledger table `acquisition`", file=sys.stderr)
    for flag in rows["mixture_flags"]:
        print(f"warning: stage {flag['stage']}: {flag['kind']}: {flag['message']}", file=sys.stderr)
    if progress:
        print(f"done: {counts['executed']} task(s) run, {counts['skipped']} already complete", file=sys.stderr)
    return RunResult(out, plan, rows, manifests, report, counts["executed"], counts["skipped"])
