"""`curate slurm`: the generated sbatch script (Ray head and workers, token handling, ports, the run and
the cleanup), the dry run, and the script executed end to end with stand-ins for srun, scontrol and
hostname: two `ray start` nodes in a private network namespace running the demo."""
from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from curation.commands.cli import main
from curation.commands.slurm import SlurmJob, render, submit
from curation.errors import CurateError
from tests.conftest import DEMO, REPO


def _job(tmp_path, **kw):
    return SlurmJob(recipe=DEMO, out=tmp_path / "out", nodes=3, cpus_per_node=8, **kw)


def test_script_starts_head_and_workers_and_runs_the_recipe(tmp_path):
    text = render(_job(tmp_path, partition="cpu", time="1-02:00", port=6390))
    lines = text.splitlines()
    assert lines[0] == "#!/bin/bash"
    sbatch = [line for line in lines if line.startswith("#SBATCH")]
    assert sbatch == ["#SBATCH --job-name=curate-demo", "#SBATCH --nodes=3", "#SBATCH --ntasks-per-node=1",
                      "#SBATCH --cpus-per-task=8", f"#SBATCH --output={tmp_path}/out/slurm/%x-%j.log",
                      "#SBATCH --partition=cpu", "#SBATCH --time=1-02:00"]
    head = [line for line in lines if line.startswith("ray start --head")]
    assert len(head) == 1 and "--port=6390" in head[0] and '--node-ip-address="$head_ip"' in head[0]
    assert "--num-cpus=8" in head[0] and "--include-dashboard=false" in head[0] and "--block" in head[0]
    workers = [line.strip() for line in lines if "srun" in line]
    assert workers == ['srun --nodes=1 --ntasks=1 --cpus-per-task=8 -w "$node" ray start --block '
                       '--address="$RAY_ADDRESS" --num-cpus=8 --disable-usage-stats &']
    assert 'for node in "${nodes[@]:1}"; do' in lines           # every node but the first
    assert 'export RAY_ADDRESS="$head_ip:6390"' in lines
    assert f'curate run {DEMO} --out {tmp_path}/out --address "$RAY_ADDRESS"' in lines
    assert "python - 3 300 <<'WAIT'" in lines                   # waits for all three nodes
    assert lines.index("trap stop EXIT") < lines.index(head[0])  # cleanup armed before anything starts


def test_token_is_per_job_private_and_never_in_the_script(tmp_path):
    text = render(_job(tmp_path))
    assert 'export RAY_AUTH_MODE=token RAY_AUTH_TOKEN_PATH="$job_dir/auth_token"' in text
    assert f'job_dir={tmp_path}/out/slurm/job-"$SLURM_JOB_ID"' in text
    assert "umask 077" in text and 'chmod 700 "$job_dir"' in text and 'rm -rf "$job_dir"' in text
    assert not re.search(r"[0-9a-f]{32}", text)                 # no token value written into the script
    assert "RAY_AUTH_TOKEN=" not in text


def test_script_is_valid_bash(tmp_path):
    path = tmp_path / "job.sbatch"
    path.write_text(render(_job(tmp_path, time="30")))
    p = subprocess.run(["bash", "-n", str(path)], capture_output=True, text=True)
    assert p.returncode == 0, p.stderr


@pytest.mark.parametrize("kw,says", [({"nodes": 0}, "--nodes and --cpus-per-node must be >= 1"),
                                     ({"port": 80}, "--port must be in 1024..65535"),
                                     ({"time": "two hours"}, "is not a Slurm time"),
                                     ({"partition": "cpu; rm -rf /"}, "--partition 'cpu; rm -rf /'")])
def test_bad_options_are_refused(tmp_path, kw, says):
    job = _job(tmp_path)
    for k, v in kw.items():
        setattr(job, k, v)
    with pytest.raises(CurateError, match=re.escape(says)):
        render(job)


def test_dry_run_writes_and_prints_the_script(tmp_path, capsys):
    out = tmp_path / "o u t"                                   # a path that needs quoting
    assert main(["slurm", str(DEMO), "--nodes", "2", "--cpus-per-node", "4", "--out", str(out), "--dry-run"]) == 0
    script = out / "slurm" / "curate-demo.sbatch"
    printed = capsys.readouterr()
    assert printed.out == script.read_text() and f"sbatch {script}" in printed.err
    assert os.access(script, os.X_OK)
    assert f"--out '{out}'" in printed.out and f"cd '{out}'" in printed.out


def test_submit_without_sbatch_says_what_to_do(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(CurateError, match="sbatch is not on PATH"):
        submit(tmp_path / "job.sbatch")


STAND_INS = {
    "scontrol": '#!/bin/sh\n[ "$1 $2" = "show hostnames" ] && printf "node-a\\nnode-b\\n"\n',
    "hostname": '#!/bin/sh\necho 127.0.0.1\n',
    # srun: drop its options (`-w NODE` takes a value), run the command here
    "srun": '#!/bin/bash\nwhile [[ "$1" == -* ]]; do [[ "$1" == -w ]] && shift; shift; done\nexec "$@"\n',
}


@pytest.mark.slow
def test_script_runs_the_demo_on_two_nodes(tmp_path):
    if subprocess.run(["unshare", "-n", "true"], capture_output=True).returncode:
        pytest.skip("needs `unshare -n` (a private network namespace) to keep the nodes on loopback")
    shims = tmp_path / "shims"
    shims.mkdir()
    for name, body in STAND_INS.items():
        (shims / name).write_text(body)
        (shims / name).chmod(0o755)
    job = SlurmJob(recipe=DEMO, out=tmp_path / "out", nodes=2, cpus_per_node=1, join_timeout=120,
                   bin_dir=Path(sys.executable).parent)   # this venv's ray, python and curate
    script = tmp_path / "job.sbatch"
    script.write_text(render(job))
    job_id = f"t{os.getpid()}"
    env = {**os.environ, "PATH": f"{shims}:{os.environ['PATH']}", "SLURM_JOB_ID": job_id,
           "SLURM_JOB_NODELIST": "node-[a-b]", "PYTHONPATH": str(REPO), "RAY_TMPDIR": str(tmp_path / "ray"),
           "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "1", "HOME": str(tmp_path)}
    for var in ("RAY_ADDRESS", "RAY_AUTH_MODE", "RAY_AUTH_TOKEN", "RAY_AUTH_TOKEN_PATH"):
        env.pop(var, None)
    p = subprocess.run(["unshare", "-n", "bash", "-c", f"ip link set lo up && bash {script}"], env=env,
                       capture_output=True, text=True, timeout=1200)
    assert p.returncode == 0, (p.stdout[-2000:], p.stderr[-4000:])
    assert "ray: 2 nodes joined" in p.stderr and "cluster: 2 node(s) checked" in p.stderr
    for m in ("stage1", "cooldown", "long-context-4k"):
        assert (job.out / "manifests" / f"{m}.json").read_bytes() == \
            (REPO / "manifests" / "demo" / f"{m}.json").read_bytes()
    assert not (job.out / "slurm" / f"job-{job_id}").exists()   # the token went with the job
    left = subprocess.run(["pgrep", "-f", f"/tmp/ray-{job_id}"], capture_output=True, text=True).stdout.split()
    assert left == []                                            # every Ray process stopped
    shutil.rmtree(f"/tmp/ray-{job_id}", ignore_errors=True)
