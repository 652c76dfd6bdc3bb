"""A task that streams many files at once (the drop-list assemblies: one open resolve part per partition) raises
its soft limit on open files first: under a node's soft limit (here 64, in a subprocess) 300 open parts fail with
`Too many open files` without it and stream with it; where the hard limit is too low the error says what to raise."""
from __future__ import annotations

import subprocess
import sys

import pytest

from tests.conftest import REPO

PROBE = r"""
import resource, sys
from pathlib import Path
import numpy as np, pyarrow as pa, pyarrow.parquet as pq
from curation.corpus.cc_files import ShardRuns
from curation.core.fds import ensure_open_files
from curation.errors import CurateError

folder, ask, hard = Path(sys.argv[1]), sys.argv[2] == "ask", int(sys.argv[3])
resource.setrlimit(resource.RLIMIT_NOFILE, (64, hard if hard else resource.getrlimit(resource.RLIMIT_NOFILE)[1]))
paths = []
for q in range(300):
    paths.append(folder / f"{q:03d}.parquet")
    pq.write_table(pa.table({"shard": np.arange(3, dtype=np.int64), "q": [q] * 3}), paths[-1])
try:
    if ask:
        ensure_open_files(len(paths), "the test's assembly")
    runs = [ShardRuns(p, lambda t: t.column("shard").to_numpy()) for p in paths]
    rows = sum(piece.num_rows for number in range(3) for r in runs for piece in r.take(number))
    print("ok", rows, resource.getrlimit(resource.RLIMIT_NOFILE)[0])
except CurateError as e:
    print("refused", e)
except OSError as e:
    print("oserror", e)
"""


def _probe(tmp_path, ask: bool, hard: int = 0) -> str:
    folder = tmp_path / f"{ask}-{hard}"
    folder.mkdir()
    p = subprocess.run([sys.executable, "-c", PROBE, str(folder), "ask" if ask else "no", str(hard)], cwd=REPO,
                       capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr[-3000:]
    return p.stdout.strip().splitlines()[-1]


@pytest.mark.slow
def test_an_assembly_asks_for_the_files_it_opens(tmp_path):
    assert "Too many open files" in _probe(tmp_path, ask=False)           # the failure it prevents
    assert _probe(tmp_path, ask=True) == "ok 900 556"                        # 300 parts + the margin of 256
    refused = _probe(tmp_path, ask=True, hard=100)
    assert refused.startswith("refused the test's assembly opens 300 files at once, but this process may open "
                              "at most 100") and "ulimit -n 556" in refused and "lower the recipe's partitions" in refused
