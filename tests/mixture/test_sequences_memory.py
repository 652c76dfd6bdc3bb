"""The stage's sequences are read from the shards with `pread`, not a memory map (on the 100k scale corpus the
mapping's touched pages grew the driver's RSS by the shard's 240 MB: reports/benchmarks/scale.md); they are the
tokens a memory map of the shard gives, in the plan's order. (A synthetic shard written in this test did not
reproduce the mapping's growth, so the memory figure is the benchmark's, not a test's.)"""
from __future__ import annotations

import json
import subprocess
import sys

from tests.conftest import REPO

PROBE = r"""
import json, sys
from pathlib import Path
import numpy as np
from curation.core.atomic import save_array
from curation.mixture.sequences import stream_sequences
from curation.shards import IndexedWriter, merge

mdir, n_docs, check = Path(sys.argv[1]), int(sys.argv[2]), sys.argv[3] == "check"
rng = np.random.default_rng(0)
w = IndexedWriter(mdir / "part")
lengths = rng.integers(100, 900, n_docs)
for i, n in enumerate(lengths):
    w.add(np.arange(i, i + n, dtype=np.int32) % 60000)
w.close()
merge([mdir / "part"], mdir / "src")   # as a run writes it: 4 MB writes (the page cache holds large folios)
save_array(mdir / "plan.npy", np.ones(n_docs, np.int32))
sources = [{"name": "src", "prefix": "src", "plan": {"path": "plan.npy"}, "effective_tokens": int(lengths.sum())}]

def hwm():
    return int(Path("/proc/self/status").read_text().split("VmHWM:")[1].split()[0]) / 1024

Path("/proc/self/clear_refs").write_text("5")
before = hwm()
digest, total = 0, 0
for seq, held in stream_sequences(mdir, sources, "stage-fp", 4096, 0):
    total += int(seq.size)
    if check:
        digest = (digest * 31 + int(seq.astype(np.int64).sum())) % (1 << 61)
grew = hwm() - before
if check:   # the same tokens as through a memory map of the shard, in the plan's order
    import curation.mixture.sequences as q
    from curation.mixture.sequences import plan_order
    tokens = np.memmap(mdir / "src.bin", dtype=np.int32, mode="r")
    starts = np.concatenate([[0], np.cumsum(lengths)[:-1]])
    _, docs = plan_order("stage-fp", [np.ones(n_docs, np.int32)])
    flat = np.concatenate([tokens[starts[d]:starts[d] + lengths[d]] for d in docs])
    seqs = [flat[i:i + 4096] for i in range(0, flat.size, 4096)]
    want = 0
    for s in seqs:
        want = (want * 31 + int(np.pad(s, (0, 4096 - s.size)).astype(np.int64).sum())) % (1 << 61)
    assert want == digest, (want, digest)
print(json.dumps({"grew_mb": grew, "tokens": int(lengths.sum()), "total": total}))
"""


def _probe(tmp_path, n_docs: int, mode: str) -> dict:
    folder = tmp_path / f"{mode}-{n_docs}"
    folder.mkdir()
    done = subprocess.run([sys.executable, "-c", PROBE, str(folder), str(n_docs), mode], capture_output=True,
                          text=True, check=True, cwd=REPO)
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_the_sequences_are_the_shards_tokens_in_plan_order(tmp_path):
    got = _probe(tmp_path, 2000, "check")
    assert got["total"] >= got["tokens"]
