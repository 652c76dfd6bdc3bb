"""tests/benchmarks/gpu_check.py runs end to end with tiny sizes (on CPU here: it must then say that no
GPU was available and still exit 0 with the CPU figures)."""
from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest

from tests.conftest import REPO


@pytest.mark.slow
def test_gpu_check_script_runs_and_writes_its_report(tmp_path):
    import torch
    out = tmp_path / "gpu.md"
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    done = subprocess.run([sys.executable, str(REPO / "tests" / "benchmarks" / "gpu_check.py"), "--quick",
                           "--out", str(out)], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    report = out.read_text()
    for section in ("## Image codec", "## Audio codec", "## Trainer: Mamba-2 scan"):
        assert section in report
    cuda = torch.cuda.is_available()
    assert ("No GPU was available" in report) != cuda
    assert f"GPU **{torch.cuda.get_device_name(0) if cuda else 'none'}**" in report
    shares = [float(x) for x in re.findall(r"\| ([\d.]+)% \(", report)]
    assert len(shares) == (7 if cuda else 2) and all(0 <= s <= 100 for s in shares)
    assert re.search(r"\| cpu \| 4 \| prefetch \|", report) and re.search(r"\| cpu \| [\d.]+ \| [\d,]+ \|", report)
    if not cuda:   # the PyTorch scan checked against the recurrence instead of the kernel
        diff = float(re.search(r"largest difference ([\d.e+-]+)\.", report).group(1))
        assert diff < 1e-10


@pytest.mark.slow
def test_gpu_check_pipeline_mode_runs_curate_and_rewrites_only_its_section(tmp_path):
    import torch
    out = tmp_path / "gpu.md"
    out.write_text("# GPU checks\n\n## Image codec\n\nkept as it was\n")
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    done = subprocess.run([sys.executable, str(REPO / "tests" / "benchmarks" / "gpu_check.py"), "--pipeline", "--quick",
                           "--out", str(out)], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=1500)
    assert done.returncode == 0, done.stderr[-3000:]
    report = out.read_text()
    assert "## Image codec\n\nkept as it was" in report and report.count("## Pipeline") == 1
    cuda = torch.cuda.is_available()
    assert ("No GPU was available" in report) != cuda
    rows = [r for r in report.splitlines() if r.startswith("| synthetic 8 images, 4 clips |")]
    assert len(rows) == (3 if cuda else 1) and "| demo |" not in report   # --quick leaves the demo recipe out
    for row in rows:
        cells = [c.strip() for c in row.strip("|").split("|")]
        assert cells[1].startswith(("cpu", "cuda")) and float(cells[2]) > 0
        assert 0 < float(cells[5].rstrip("%")) <= 100          # the encoder's busy share
        assert float(cells[6]) > 0 and float(cells[7]) > 0       # images/s and clips/s per GPU (or CPU slot)
        assert re.fullmatch(r"[\d.]+% \(\d+\)", cells[9])        # the run's rank imbalance and rank count
    assert all("| reference |" in r for r in rows if "| cpu float32 |" in r)


@pytest.mark.slow
def test_the_image_check_skips_what_the_pipeline_quarantines(tmp_path):
    """Issue 22.11: without ../shared/data the script reads the demo shards, one of which holds a deliberately
    truncated image; decoding it crashed the check. It is skipped and named instead."""
    sys.path.insert(0, str(REPO / "tests" / "benchmarks"))
    import gpu_check
    images, _, where = gpu_check.media(tmp_path)   # an empty folder: the repository's demo media
    assert where == "the repository's demo media"
    lines = gpu_check.image_checks(images, str(REPO / "tokenizers" / "curate-demo-ibq.yaml"), False, 64 * 64,
                                   2, 2, 2)
    assert "Skipped, as the pipeline quarantines them:" in lines[0] and "(truncated_image)" in lines[0]
    assert any(line.startswith("| cpu | 2 | prefetch |") for line in lines)
