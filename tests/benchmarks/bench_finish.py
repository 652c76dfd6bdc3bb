"""The finish phase alone (ledger, manifests, report) on a completed output folder: every task is already
done, so `curate run` runs only the driver's finish. Prints one JSON line: its wall seconds and the driver's
peak RSS while it ran (VmHWM, reset when the finish starts: the start phase's peak is left out). Which curate runs
is whichever `curation` the interpreter imports, so two versions compare on the same folder and load:

    python tests/benchmarks/bench_finish.py RECIPE OUT this-branch
    git archive BASE | tar -x -C /tmp/base && PYTHONPATH=/tmp/base python tests/benchmarks/bench_finish.py RECIPE OUT base

(`bench_scale.py --keep` leaves `OUT` = `<work>/out-<N>-ray` and `RECIPE` = `<work>/scale-corpus-<N>.yaml`.)
Both rewrite the folder's ledger, manifests and report. `--ab BASE --sizes N,...` does both for each kept
size: the base first, then a copy of the folder (what the finish writes copied, the rest hard-linked), then
this code, `compare_outputs.py` between the two, and the figures into `scale.json` (`finish`), which
renders `scale.md`:

    python tests/benchmarks/bench_finish.py --ab /tmp/base --sizes 30000,100000,300000 --work WORK"""
import json
import os
import resource
import shutil
import subprocess
import sys
import time
from pathlib import Path


def measure(recipe: str, out: str, label: str) -> dict:
    import curation
    import curation.commands.run as R

    orig, seen = R._finish, {}

    def timed(*a, **k):
        seen["rss_before_mb"] = round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)
        # Linux: writing 5 to clear_refs resets the high-water mark (VmHWM), so the peak is the finish's own
        Path("/proc/self/clear_refs").write_text("5")
        t = time.perf_counter()
        try:
            return orig(*a, **k)
        finally:
            seen["finish_s"] = round(time.perf_counter() - t, 2)
            status = Path("/proc/self/status").read_text()
            seen["peak_mb"] = round(int(status.split("VmHWM:")[1].split()[0]) / 1024, 1)

    R._finish = timed
    res = R.run(recipe, out, executor="local", progress=False)
    return {"label": label, "code": curation.__file__, "executed": res.executed, **seen}


WRITTEN = ("ledger", "manifests", "megatron", "reports")   # the finish's outputs (a hard link would share them)


def _one(recipe: Path, out: Path, label: str, pythonpath: str | None) -> dict:
    env = dict(os.environ)
    if pythonpath:
        env["PYTHONPATH"] = pythonpath
    else:
        env.pop("PYTHONPATH", None)
    done = subprocess.run(["nice", "-n", "5", sys.executable, str(Path(__file__).resolve()), str(recipe), str(out), label], env=env,
                          capture_output=True, text=True, check=True, cwd="/")
    return json.loads(done.stdout.strip().splitlines()[-1])


def ab(base: str, sizes: list[int], work: Path) -> None:
    import pyarrow.parquet as pq

    sys.path.insert(0, str(Path(__file__).parent))
    import compare_outputs
    import scale_report
    from bench_scale import RESULTS, load_results

    results = load_results(RESULTS)
    section = results.setdefault("finish", {"sizes": {}})
    section["how"] = (
        "Each kept `bench_scale.py` output folder (`--keep`, this code's run) finished again with every task "
        "complete, so only the driver's finish runs (`--executor local`): first by the base commit's code, "
        "then by this code, one after the other under the same load (`tests/benchmarks/bench_finish.py --ab "
        "BASE --sizes ...`). Driver peak: the process's RSS high-water mark (VmHWM) over the finish alone "
        "(reset as it starts). The base code counts and hashes every merged shard and holds the "
        "cluster tables as Python rows; this code reads the merge markers and lets DuckDB copy the tables.")
    for n in sizes:
        recipe, out = work / f"scale-corpus-{n}.yaml", work / f"out-{n}-ray"
        first = _one(recipe, out, "base", base)
        copy = work / f"out-{n}-ray-base"
        shutil.rmtree(copy, ignore_errors=True)
        for part in out.iterdir():   # what the finish writes, copied; the shards and work files, hard-linked
            if part.is_dir():
                shutil.copytree(part, copy / part.name, copy_function=shutil.copy2 if part.name in WRITTEN else os.link)
        second = _one(recipe, out, "branch", None)
        problems = compare_outputs.compare(copy, out)
        shutil.rmtree(copy)
        if problems or first["executed"] or second["executed"]:
            raise SystemExit(f"{n}: outputs differ or tasks ran: {problems[:5]} {first} {second}")
        rows = {t: pq.read_metadata(out / "ledger" / f"{t}.parquet").num_rows for t in ("clusters", "near_duplicates")}
        section["sizes"][str(n)] = {**rows, "base": first, "branch": second, "identical": True,
                                    "load": f"{os.getloadavg()[0]:.1f}"}
        print(n, json.dumps(section["sizes"][str(n)]), flush=True)
        # not `save_results`: it dates the whole file (the other figures) today
        RESULTS.write_text(json.dumps(results, indent=1, sort_keys=True))
    scale_report.render(results)


if __name__ == "__main__":
    if sys.argv[1] == "--ab":
        import argparse

        ap = argparse.ArgumentParser()
        ap.add_argument("--ab", required=True, help="a checkout of the base commit's code")
        ap.add_argument("--sizes", required=True)
        ap.add_argument("--work", required=True, help="bench_scale.py's --work, run with --keep")
        a = ap.parse_args()
        ab(a.ab, [int(x) for x in a.sizes.split(",")], Path(a.work))
    else:
        print(json.dumps(measure(*sys.argv[1:4])), flush=True)
