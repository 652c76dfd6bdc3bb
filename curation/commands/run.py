"""`curate run`: acquire, plan, execute the phase table, then write ledger, manifests and report."""
from __future__ import annotations

import os
import sys
from dataclasses import dataclass
from pathlib import Path

from curation.acquire.sources import acquire_all
from curation.commands.outguard import check_inputs, check_recipe, remove_stale
from curation.core.layout import ledger_dir, source_prefix
from curation.core.outloc import Remote, is_remote, parse_out
from curation.core.outlock import OutputLock
from curation.core.resources import Resources
from curation.errors import CurateError, RunFailed
from curation.ledger import build_rows, write_ledger
from curation.ledger.environment import utc_now
from curation.ledger.health import source_failures
from curation.ledger.pools import main_pool
from curation.ledger.ranks import describe as describe_ranks
from curation.mixture.manifests import handoff_rows, remove_manifests, stage_handoffs, write_manifests
from curation.mixture.planning import ledger_rows as mixture_ledger_rows
from curation.mixture.planning import mark_inclusion, plan_recipe
from curation.mixture.signing import load_private_key, remove_signatures, sign_manifest
from curation.plan.graph import Plan, load_plan
from curation.recipe import load_recipe
from curation.report import write_report
from curation.runtime import mirror
from curation.runtime.build import media_kinds, plugin_modalities
from curation.runtime.execute import execute
from curation.runtime.local import LocalExecutor
from curation.runtime.ray_executor import RayExecutor
from curation.shards.shardset import ShardSet
from curation.steps.image.worklist import write_worklist
from curation.train.writeback import previous_consumed

EXECUTORS = {"local": LocalExecutor, "ray": RayExecutor}


@dataclass
class RunResult:
    out: Path | str          # the output folder, or the output URL
    plan: Plan
    rows: dict
    manifests: list[Path]
    report: Path
    executed: int
    skipped: int
    executor: str


# Where `auto` starts paying for Ray, measured on 2 cores (`tests/benchmarks/bench_scale.py --crossover`,
# reports/benchmarks/scale.md): best of 3, Ray with 2 workers took 1.03× the local executor's time on 23 MB
# of gzip JSON lines (20k documents, 4 shards) and 0.86× on 47 MB (40k, 8 shards). Below it, Ray's start-up,
# shutdown and per-worker model loading cost more than the second worker gains. Input bytes as stored.
AUTO_RAY_INPUT_BYTES = 30 * 10**6


def auto_executor(input_bytes: int, shards: int, slots: int) -> tuple[str, str]:
    """(executor, why) for a run on this machine: Ray from `AUTO_RAY_INPUT_BYTES` of input in at least two
    shards with at least two workers to run them, else the local executor."""
    what = f"{input_bytes / 1e6:,.1f} MB of input in {shards} shard(s)"
    if min(slots, shards) < 2:
        return "local", f"auto: {what}, nothing to run in parallel"
    if input_bytes < AUTO_RAY_INPUT_BYTES:
        return "local", f"auto: {what}, below the {AUTO_RAY_INPUT_BYTES / 1e6:.0f} MB where Ray pays off"
    return "ray", f"auto: {what}, {min(slots, shards)} workers"


def choose_executor(plan: Plan, executor: str, address: str | None, workers: int | None = None) -> tuple[str, str]:
    """(executor, why). `auto`: Ray when joining a cluster (`address` or RAY_ADDRESS), else `auto_executor`
    on the plan's input size and shards, with `workers` (default: the CPUs)."""
    if executor != "auto":
        return executor, "as asked"
    if address or os.environ.get("RAY_ADDRESS"):
        return "ray", "auto: joining a cluster"
    size = sum(f.size for files in plan.recipe.inputs.values() for f in files)
    return auto_executor(size, len(plan.process), workers or os.cpu_count() or 1)


def _make_output(out: Path | str) -> None:
    """Create the output folder (or check the bucket), with one sentence when it cannot be written."""
    if is_remote(out):
        Remote(out).check()
        return
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise _unwritable(out, e) from e


def _unwritable(out: Path, e: OSError) -> CurateError:
    return CurateError(f"cannot write the output folder {out} ({e.strerror}); give --out a writable folder "
                       f"(a finished run's outputs can still be read there: curate verify, curate ledger)")


def run(recipe_path: str | Path, out: str | Path, *, workers: int | None = None, address: str | None = None,
        progress: bool = True, resolver=None, executor: str = "auto", force: bool = False,
        retries: int | None = None, barriers: bool = False, sign: str | Path | None = None) -> RunResult:
    """`out`: a folder or an s3:// URL (`curation.core.outloc`). `force`: replace another recipe's outputs.
    `retries`: how often a task lost with its worker or node is run again (default: the recipe's
    `task_retries`). `barriers`: run the stages one after another (benchmarks; same outputs).
    `sign`: an ed25519 private key (PEM) to sign each manifest with (`curation.mixture.signing`).
    `resolver`: host name -> addresses for the network guard (default: the system's; tests inject one)."""
    started_at = utc_now()
    key = load_private_key(Path(sign)) if sign is not None else None   # a bad key stops before any work
    out = parse_out(out)                    # a scheme that cannot be written: refused before anything exists
    early = load_recipe(recipe_path, resolve_inputs=False)
    check_inputs(early, out)
    _make_output(out)
    lock = OutputLock(out, notes=progress, recipe=early.recipe.name, started_at=started_at)
    try:
        lock.acquire()
    except OSError as e:   # a read-only folder: also a finished run's, which a re-run would rewrite
        raise _unwritable(out, e) from e
    try:
        replaced = check_recipe(out, early.recipe.name, force)
        if not is_remote(out):
            return _run(recipe_path, out, out, early, lock, replaced, started_at, workers, address, progress,
                        resolver, executor, retries, barriers, key)
        local = mirror.mirror_dir(out)      # the driver's copy of the output (see curation.runtime.mirror)
        local.mkdir(parents=True, exist_ok=True)
        mirror.retract(Remote(out))
        return _run(recipe_path, out, local, early, lock, replaced, started_at, workers, address, progress,
                    resolver, executor, retries, barriers, key)
    finally:
        lock.release()


def _run(recipe_path, out: Path | str, local: Path, early, lock, replaced: bool, started_at, workers, address,
         progress, resolver, executor, retries, barriers, key=None) -> RunResult:
    """The run, with the lock held: tasks write `out` (a URL: they publish there), the driver works in `local`
    (the output folder itself, or the driver's mirror of the URL, pushed at the end)."""
    remote = Remote(out) if is_remote(out) else None
    if any(s.acquire for s in early.recipe.sources):
        acquire_all(early, local / "raw", resolver=resolver)
    plan = load_plan(recipe_path, raw_root=local / "raw")
    lock.update(fingerprint=plan.recipe.fingerprint)
    chosen, why = choose_executor(plan, executor, address, workers)
    if progress:
        print(f"executor: {chosen} ({why})", file=sys.stderr)
    # what tasks open by path on whichever node runs them (a cluster checks every node sees them)
    inputs = [plan.recipe.path, plan.vocab.path, plan.vocab.text_tokenizer_path,
              *(f.path for fs in plan.recipe.inputs.values() for f in fs)]
    retries = plan.recipe.recipe.task_retries if retries is None else retries
    with EXECUTORS[chosen](workers=workers, address=address, progress=progress, out=out, inputs=inputs,
                           media=media_kinds(plan.recipe.recipe), modalities=plugin_modalities(plan.recipe.recipe),
                           retries=retries) as ex:
        done = execute(plan, str(out) if remote else out, ex, barriers=barriers)
        ranks = codec_ranks(ex, plan)
        if not remote:   # the tasks write this folder: the finish hands them its independent pieces too
            _tidy(local, done, replaced, progress)
            result = _finish(plan, done, local, started_at, progress, root=None, ranks=ranks, key=key, tasks=ex.map)
    if remote:
        mirror.pull(remote, local, done.markers)
        _tidy(local, done, replaced, progress)
        try:
            result = _finish(plan, done, local, started_at, progress, root=out, ranks=ranks, key=key)
        except RunFailed:   # its ledger and report (no manifest) are published too
            mirror.push(remote, local, done.markers)
            raise
        counts = mirror.push(remote, local, done.markers)
        if progress:
            print(f"published to {out}: {counts['uploaded']} file(s) uploaded, {counts['removed']} removed, "
                  f"{counts['manifests']} manifest(s) last", file=sys.stderr)
        result.out, result.report = out, f"{out}/{Path(result.report).relative_to(local)}"
        result.manifests = [f"{out}/manifests/{Path(m).name}" for m in result.manifests]
    result.executor = chosen
    return result


def _tidy(local: Path, done, replaced: bool, progress: bool) -> None:
    """Between the tasks and the finish: what no task of this run wrote goes."""
    if replaced:   # --force onto another recipe's output: its trainings' write-backs go with it
        (ledger_dir(local) / "consumed.parquet").unlink(missing_ok=True)
    remove_stale(local, done.markers, progress)


def codec_ranks(executor, plan: Plan) -> int:
    """How many codec tasks the executor runs at once, the ranks of the image batch plan: the cluster's GPUs
    when the codec tasks ask for GPUs and it has some, else the executor's task slots (1 for local)."""
    gpus = int(getattr(executor, "gpus", 0))
    if gpus and any(Resources.from_json(n.resources).wants_gpu for n in plan.tokenize):
        return gpus
    return max(1, int(getattr(executor, "slots", 1)))


def _finish(plan: Plan, done, out: Path, started_at, progress: bool, root, ranks: int = 1,
            key=None, tasks=None) -> RunResult:
    """Ledger, manifests and report from the tasks' markers (`out`: a local folder). `tasks`: the executor's
    `map`, when its tasks write `out` (`mixture.manifests.stage_handoffs`)."""
    write_worklist(plan.recipe, out)   # flagged captions to regenerate, also when the run fails its checks
    rows = build_rows(plan, done.markers, out, started_at=started_at, finished_at=utc_now(), ranks=ranks)
    if progress and rows.get("rank_plan"):
        print(describe_ranks(rows["rank_plan"]), file=sys.stderr)
    tokens = {s: t["total_tokens"] for s, t in main_pool(rows).items()}
    docs = {s: t["documents"] for s, t in main_pool(rows).items()}
    stage_plans = plan_recipe(plan.recipe.recipe, tokens, docs,
                              lengths=lambda s, suffix="": ShardSet.on_disk(Path(f"{source_prefix(out, s)}{suffix}")).lengths())
    mark_inclusion(rows["sources"], stage_plans)
    rows.update(mixture_ledger_rows(stage_plans, plan.recipe.fingerprint))
    rows["consumed"] = previous_consumed(ledger_dir(out))   # training write-backs outlive re-runs
    rows["task_retries"] = [{"run": plan.recipe.fingerprint, **r} for r in done.retries]
    failures = source_failures(plan.recipe.recipe, rows)
    if failures:   # the ledger and report show what happened; no manifest may point a trainer at it
        write_ledger(rows, ledger_dir(out))
        report = write_report(rows, out)
        remove_manifests(out)
        remove_signatures(out / "manifests")
        raise RunFailed(f"{len(failures)} source(s) failed the run's checks (report: {report}):\n  "
                        + "\n  ".join(failures))
    # plans and Megatron hand-offs first: what Megatron will draw goes into the ledger, which the manifests seal
    staged = stage_handoffs(plan, stage_plans, rows, out, root, markers=done.markers, tasks=tasks)
    more = handoff_rows(staged, plan.recipe.fingerprint)
    rows["handoff"] = more["handoff"]
    rows["mixture_flags"] = [*rows["mixture_flags"], *more["mixture_flags"]]
    write_ledger(rows, ledger_dir(out))
    manifests = write_manifests(plan, staged, out, tasks=tasks)
    remove_signatures(out / "manifests")     # none of an earlier run may look like this one's
    for m in manifests if key is not None else ():
        sign_manifest(m, key)
    report = write_report(rows, out)
    _warn(rows)
    if progress:
        print(f"done: {done.executed} task(s) run, {done.skipped} already complete", file=sys.stderr)
    return RunResult(out, plan, rows, manifests, report, done.executed, done.skipped, "")


def _warn(rows: dict) -> None:
    refused: dict[str, list] = {}
    for a in rows.get("acquisition", []):
        n = refused.setdefault(a["source"], [0, 0, a["kind"]])
        n[0] += a["items"] if a["outcome"] == "refused" else 0
        n[1] += a["items"]
    for source, (bad, total, kind) in refused.items():
        if bad:
            by = "the network guard" if kind == "urls" else "input containment and archive checks"
            print(f"acquisition: {source}: {bad} of {total} item(s) refused by {by} "
                  f"({100 * bad / total:.1f}%); reasons in the ledger table `acquisition`", file=sys.stderr)
    for flag in rows["mixture_flags"]:
        print(f"warning: stage {flag['stage']}: {flag['kind']}: {flag['message']}", file=sys.stderr)
