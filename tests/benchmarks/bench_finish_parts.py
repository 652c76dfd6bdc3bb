"""What the finish spends, part by part, with the packed Megatron hand-off written by the driver (the recipe as
`bench_scale.py` ran it: one prefix up to megatron-core's int32 document length) and by tasks (the same recipe
with `shards.max_handoff_bytes` giving about nine prefixes, each a task of the run's executor). The default
writes every prefix of a stage above 2^31 - 1 tokens as a task too, so the task figures are what the default
does at a billion documents; the cost model (`scale_model.py`) uses them.

Each kept `bench_scale.py --keep` folder is finished again (`curate run --executor ray --workers 2 --force`,
every task complete), alternating the two recipes `--repeats` times; the first run of each is dropped (it
rewrites the other variant's packed files from a cold page cache). One run prints one JSON line:

    python tests/benchmarks/bench_finish_parts.py RECIPE OUT

and `--sizes 100000,300000,1000000 --work WORK` runs them all and writes the medians into `scale.json`
(`finish_parts`), which renders `scale.md`."""
import functools
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

# the driver's steps of the finish, timed where `curation.commands.run` calls them
STEPS = ("build_rows", "stage_handoffs", "write_ledger", "write_manifests", "write_report")
TARGET_PREFIXES = 9


def measure(recipe: str, out: str) -> dict:
    import curation.commands.run as run_mod
    import curation.mixture.megatron as megatron
    from curation.commands.cli import main

    seconds: dict[str, float] = {}

    def timed(f, key):
        @functools.wraps(f)
        def g(*a, **k):
            t = time.perf_counter()
            try:
                return f(*a, **k)
            finally:
                seconds[key] = seconds.get(key, 0.0) + time.perf_counter() - t
        return g

    for name in STEPS:
        setattr(run_mod, name, timed(getattr(run_mod, name), name))
    megatron.write_packed = timed(megatron.write_packed, "driver_copy")   # the one-pass layout on the driver
    megatron.chunk_plans = timed(megatron.chunk_plans, "chunk_plans")
    packed = megatron._packed_prefixes

    def prefixes(*a, **k):   # `tasks` (the executor's map) is its 9th argument: time the tasks' wall
        if len(a) > 8 and a[8] is not None:
            a = (*a[:8], timed(a[8], "prefix_tasks"))
        return packed(*a, **k)

    megatron._packed_prefixes = prefixes
    import curation.mixture.manifests as manifests
    digests = manifests.ledger_digests

    def table_digests(*a, tasks=None, **k):   # the large tables' chunks hashed by tasks: time their wall
        return digests(*a, tasks=None if tasks is None else timed(tasks, "digest_tasks"), **k)

    manifests.ledger_digests = table_digests
    t = time.perf_counter()
    rc = main(["run", recipe, "--out", out, "--executor", "ray", "--workers", "2", "--force", "-q"])
    seconds["command"] = time.perf_counter() - t
    if rc:
        raise SystemExit(f"curate run exited {rc}")
    # the driver's own finish: every step but the copy into the packed prefixes (written by tasks or itself) and
    # the tasks that hash the large ledger tables' chunks (`merkle.ledger_digests`)
    own = sum(seconds.get(s, 0.0) for s in STEPS) - seconds.get("prefix_tasks", 0.0) - seconds.get("driver_copy", 0.0) \
        - seconds.get("digest_tasks", 0.0)
    return {k: round(v, 3) for k, v in {**seconds, "driver_own": own}.items()}


def _one(recipe: Path, out: Path) -> dict:
    done = subprocess.run([sys.executable, str(Path(__file__).resolve()), str(recipe), str(out)], capture_output=True,
                          text=True, check=True, cwd="/")
    return json.loads(done.stdout.strip().splitlines()[-1])


def run_sizes(sizes: list[int], work: Path, repeats: int) -> None:
    sys.path.insert(0, str(Path(__file__).parent))
    import scale_report
    from bench_scale import RESULTS, load_results

    results = load_results(RESULTS)
    section = results.setdefault("finish_parts", {"sizes": {}})
    section["how"] = __doc__.split("\n\n")[0].replace("\n", " ") + " " + \
        "Finish-only re-runs of the kept folders (`tests/benchmarks/bench_finish_parts.py`), medians of " \
        f"{repeats} runs per variant after one dropped."
    for n in sizes:
        recipe, out = work / f"scale-corpus-{n}.yaml", work / f"out-{n}-ray"
        tokens = results["curate"][str(n)]["tokens"]
        bound = -(-tokens * 4 // TARGET_PREFIXES)
        tasks_recipe = work / f"scale-corpus-{n}-prefixes.yaml"
        tasks_recipe.write_text(recipe.read_text().rstrip() + f"\nshards: {{max_handoff_bytes: {bound}}}\n")
        runs: dict[str, list[dict]] = {"driver": [], "tasks": []}
        for r in range(repeats + 1):
            for label, path in (("driver", recipe), ("tasks", tasks_recipe)):
                got = _one(path, out)
                print(n, label, r, json.dumps(got), flush=True)
                if r:
                    runs[label].append(got)
        med = {label: {k: round(statistics.median(x.get(k, 0.0) for x in rs), 3) for k in rs[0]}
               for label, rs in runs.items()}
        section["sizes"][str(n)] = {**med, "tokens": tokens, "max_handoff_bytes": bound,
                                    "load": f"{os.getloadavg()[0]:.1f}", "repeats": repeats}
        RESULTS.write_text(json.dumps(results, indent=1, sort_keys=True))
    scale_report.render(results)


if __name__ == "__main__":
    if sys.argv[1] == "--sizes":
        import argparse

        ap = argparse.ArgumentParser()
        ap.add_argument("--sizes", required=True)
        ap.add_argument("--work", required=True, help="bench_scale.py's --work, run with --keep")
        ap.add_argument("--repeats", type=int, default=2)
        a = ap.parse_args()
        if a.repeats < 1:
            raise SystemExit("--repeats must be at least 1 (the first run of each variant is dropped)")
        run_sizes([int(x) for x in a.sizes.split(",")], Path(a.work), a.repeats)
    else:
        print(json.dumps(measure(*sys.argv[1:3])), flush=True)
