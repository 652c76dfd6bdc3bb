"""The packed hand-off's read of a stage: `curation.mixture.sequences.stream_sequences` over a plan of N
documents, by N, this code against a checkout of another (`--base DIR`: `git archive BASE | tar -x -C DIR`).
That read is the part of a run's finish that grows with the corpus: every planned document is read once, in
the plan's order, to write the packed `.bin` (and again by `curate verify`). Results and the alternatives
tried: reports/benchmarks/sequences.md.

    python tests/benchmarks/bench_sequences.py --docs 100000 1000000 [--base /tmp/base] [--json F]

A synthetic source of N documents (lengths 50-1,250 tokens, mean 650: the scale corpus's mean, ids from a
seeded generator) merged as a run merges it, every document planned once (a quarter twice), 4,096-token
sequences. Each code runs in a fresh process: seconds of `stream_sequences` with the sequences consumed
(sha256 over every sequence and its per-source counts, which must agree between the codes), µs per planned
document, and the RSS high-water mark it added.
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]

PROBE = r"""
import hashlib, json, sys, time
from pathlib import Path
import numpy as np
from curation.mixture.sequences import stream_sequences

def hwm():
    return int(Path("/proc/self/status").read_text().split("VmHWM:")[1].split()[0]) / 1024

mdir, n = Path(sys.argv[1]), int(sys.argv[2])
sources = json.loads((mdir / "sources.json").read_text())
Path("/proc/self/clear_refs").write_text("5")
before, t0 = hwm(), time.perf_counter()
h, count = hashlib.sha256(), 0
for seq, held in stream_sequences(mdir, sources, "bench-stage", 4096, 0):
    h.update(np.ascontiguousarray(seq, dtype=np.int32).tobytes())
    h.update(json.dumps(sorted(held.items())).encode())
    count += 1
seconds = time.perf_counter() - t0
print(json.dumps({"seconds": seconds, "sequences": count, "sha256": h.hexdigest(), "added_mb": hwm() - before}))
"""


def build(work: Path, n: int) -> Path:
    """The stage folder of N documents (built once)."""
    import numpy as np

    from curation.core.atomic import save_array
    from curation.shards import IndexedWriter, merge
    mdir = work / f"docs-{n}"
    if (mdir / "sources.json").is_file():
        return mdir
    mdir.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(n)
    lengths = rng.integers(50, 1251, n)
    w = IndexedWriter(mdir / "part")
    vocab = rng.integers(0, 50_000, 1 << 20).astype(np.int32)
    for i, k in enumerate(lengths.tolist()):
        at = (i * 7919) % (vocab.size - k)
        w.add(vocab[at:at + k])
    w.close()
    merge([mdir / "part"], mdir / "src")
    for p in mdir.glob("part.*"):
        p.unlink()
    plan = np.ones(n, np.int32)
    plan[rng.random(n) < 0.25] = 2
    save_array(mdir / "plan.npy", plan)
    tokens = int((lengths * plan).sum())
    (mdir / "sources.json").write_text(json.dumps([{"name": "src", "prefix": "src", "plan": {"path": "plan.npy"},
                                                    "effective_tokens": tokens}]))
    return mdir


def measure(mdir: Path, n: int, code: Path) -> dict:
    done = subprocess.run([sys.executable, "-c", PROBE, str(mdir), str(n)], capture_output=True, text=True,
                          check=True, cwd=code, env={"PYTHONPATH": str(code), "PATH": "/usr/bin:/bin"})
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--docs", type=int, nargs="+", default=[100_000, 1_000_000])
    ap.add_argument("--work", type=Path, default=Path("/tmp/curate-bench-sequences"))
    ap.add_argument("--base", type=Path, help="a checkout of the code to compare against (run first)")
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()
    rows = []
    print("| code | documents | planned occurrences | sequences | seconds | µs per occurrence | RSS added MB |")
    print("|---|---|---|---|---|---|---|")
    for n in args.docs:
        sys.path.insert(0, str(REPO))
        mdir = build(args.work, n)
        import numpy as np
        occurrences = int(np.load(mdir / "plan.npy").sum())
        digests = set()
        for label, code in ([("base", args.base)] if args.base else []) + [("this", REPO)]:
            r = measure(mdir, n, code)
            digests.add(r["sha256"])
            print(f"| {label} | {n:,} | {occurrences:,} | {r['sequences']:,} | {r['seconds']:.2f} | "
                  f"{r['seconds'] / occurrences * 1e6:.2f} | {r['added_mb']:.0f} |", flush=True)
            rows.append({"code": label, "documents": n, "occurrences": occurrences, **r})
        if len(digests) != 1:
            raise SystemExit(f"the codes' sequences differ at {n:,} documents: {sorted(digests)}")
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1) + "\n")


if __name__ == "__main__":
    main()
