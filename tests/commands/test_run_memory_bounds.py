"""One oversized record or one decompression bomb never blows up a run's memory: a 200 MB JSON line
and a 1 GB gzip bomb are quarantined while every process of the run's tree (driver, raylet, Ray
workers) stays under a bound, measured by sampling the whole tree."""
from __future__ import annotations

import gzip
import json
import sys

import pytest

from tests.conftest import VOCAB, english_doc
from tests.proctree import run_sampled

pytestmark = pytest.mark.slow

BOUND = 1536 * 2**20   # per process; a Ray worker with curate and torch loaded idles near 300-500 MB


def test_a_200_mb_line_and_a_1_gb_gzip_bomb_stay_bounded_in_every_process(tmp_path):
    good = [json.dumps({"id": f"g{i}", "text": english_doc(i)}) for i in range(20)]
    with open(tmp_path / "huge.jsonl", "w") as f:
        f.write("\n".join(good[:10]) + "\n")
        f.write('{"id": "huge", "text": "' + "x" * (200 * 2**20) + '"}\n')
        f.write("\n".join(good[10:]) + "\n")
    with gzip.open(tmp_path / "bomb.jsonl.gz", "wb", compresslevel=9) as f:   # 1 GiB of one line, ~1 MB on disk
        block = b" " * (2**20)
        f.write(b'{"id": "bomb", "text": "')
        for _ in range(1024):
            f.write(block)
        f.write(b'"}\n')
    recipe = tmp_path / "r.yaml"
    recipe.write_text(f"""name: t
vocabulary: {VOCAB}
sources:
  - name: big
    license: CC0-1.0
    max_quarantine_share: 0.9
    input: {{paths: ["{tmp_path}/huge.jsonl", "{tmp_path}/bomb.jsonl.gz"], id_field: id}}
""")
    code, peaks = run_sampled([sys.executable, "-m", "curation.commands.cli", "run", str(recipe), "--out",
                               str(tmp_path / "out"), "--executor", "ray", "--workers", "2", "--quiet"])
    assert code == 0, run_sampled.output[-3000:]
    worst = max(peaks.items(), key=lambda kv: kv[1])
    assert worst[1] < BOUND, f"{worst[0]} peaked at {worst[1] / 2**20:.0f} MiB"
    assert len(peaks) >= 3   # the driver and Ray's processes were sampled, not just the driver
    q = [json.loads(line) for p in (tmp_path / "out" / "quarantine" / "big").glob("*.jsonl")
         for line in p.read_text().splitlines()]
    assert sorted(e["reason"] for e in q) == ["decompression_bomb", "record_too_large"]
    assert all(len(e["raw"]) <= 2000 for e in q)   # previews, never the record
