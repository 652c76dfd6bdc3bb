"""The report's work on the ledger tables that grow with the corpus (`PartRows`: rows left in the tasks' part
files): the near-duplicate cluster counts (`report.sections.dedup_sections`) and loading the AI Act
summary's DuckDB (`report.ai_act_queries.connect`), on synthetic part files of N rows, this tree against
another, each call in a fresh process; seconds and the process's peak RSS growth over the call:

    python tests/benchmarks/bench_report_tables.py --base /tmp/base --rows 1000000 3000000

(`git archive REV | tar -x -C /tmp/base` gives a base tree.) The outputs must be equal between the trees
(the sections' repr, the table's row count).
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]

CHILD = r"""
import hashlib, json, sys, time
from pathlib import Path
import numpy as np, pyarrow as pa, pyarrow.parquet as pq
from curation.core.parts import PartRows
from curation.ledger.schema import SCHEMAS

what, n, folder = sys.argv[1], int(sys.argv[2]), Path(sys.argv[3])
table = "clusters" if what == "clusters" else "near_duplicates"
schema = SCHEMAS[table]
path = folder / f"{table}-{n}.parquet"
if not path.exists():
    rng = np.random.default_rng(0)
    cols = {}
    for f in schema:
        if f.name == "run":
            continue
        if f.name == "sources":
            cols[f.name] = pa.array([sorted(set(rng.choice(list("abcd"), rng.integers(1, 3)).tolist())) for _ in range(n)],
                                    type=f.type)
        elif f.name == "members":
            cols[f.name] = pa.array([[f"m{i}"] for i in range(n)], type=f.type)
        elif f.name == "size":
            cols[f.name] = pa.array(rng.integers(2, 6, n), type=f.type)
        else:
            cols[f.name] = pa.array([f"{f.name}-{i}" for i in range(n)], type=f.type)
    pq.write_table(pa.table(cols), path)
    print(json.dumps({"built": str(path)}))
    sys.exit(0)
part = PartRows([path], schema.names, {"run": "r"})
def hwm():   # VmHWM, not ru_maxrss: a child's ru_maxrss starts at its parent's (carried across exec)
    return int(next(x for x in open("/proc/self/status") if x.startswith("VmHWM:")).split()[1])
Path("/proc/self/clear_refs").write_text("5")   # the high-water mark from here
base = hwm()
t = time.perf_counter()
if what == "clusters":
    from curation.report.sections import dedup_sections
    out = repr(dedup_sections({"clusters": part, "sources": [{"source": s} for s in "abcd"]}))
else:
    import inspect, tempfile
    from curation.report.ai_act_queries import connect
    spill = {"spill": Path(tempfile.mkdtemp(dir=folder))} if "spill" in inspect.signature(connect).parameters else {}
    con = connect({table: part}, **spill)   # as `write_summary` calls it
    out = str(con.execute(f"SELECT count(*) FROM {table}").fetchone())
seconds = time.perf_counter() - t
print(json.dumps({"seconds": seconds, "growth_mb": (hwm() - base) / 1024,
                  "output": hashlib.sha256(out.encode()).hexdigest()[:16]}))
"""


def run(tree: Path, what: str, n: int, tmp: str) -> dict:
    """One call in a fresh process importing `curation` from `tree` (not from the working directory)."""
    done = subprocess.run([sys.executable, "-c", CHILD, what, str(n), tmp], env={"PYTHONPATH": str(tree)}, cwd=tmp,
                          capture_output=True, text=True, check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--base", type=Path, required=True)
    ap.add_argument("--rows", type=int, nargs="+", default=[1_000_000])
    args = ap.parse_args()
    print("| work | rows | base s | base peak growth MB | this s | this peak growth MB | same output |")
    print("|---|---|---|---|---|---|---|")
    with tempfile.TemporaryDirectory() as tmp:
        for what in ("clusters", "summary"):
            for n in args.rows:
                run(REPO, what, n, tmp)   # builds the part file
                base, this = run(args.base, what, n, tmp), run(REPO, what, n, tmp)
                print(f"| {what} | {n:,} | {base['seconds']:.2f} | {base['growth_mb']:.0f} | {this['seconds']:.2f} | "
                      f"{this['growth_mb']:.0f} | {'yes' if base['output'] == this['output'] else 'NO'} |")


if __name__ == "__main__":
    main()
