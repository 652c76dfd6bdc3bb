"""`curate slurm`: the generated sbatch script (Ray head and workers, GPUs, explicit ports and per-job temp
dirs, token handling, the run and the cleanup), option checks, the dry run, and the script executed end
to end with stand-ins for srun, scontrol and hostname: two `ray start` nodes with one GPU each in a
private network namespace running the demo. Hostile names: test_slurm_hostile.py."""
from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from curation import __version__
from curation.commands.cli import main
from curation.commands.console import UsageError
from curation.commands.slurm import NODE_PORTS, SlurmJob, render, submit
from curation.errors import CurateError
from tests.conftest import REPO, TEXT_DEMO


def _job(tmp_path, **kw):
    return SlurmJob(recipe=TEXT_DEMO, out=tmp_path / "out", nodes=3, cpus_per_node=8, **kw)


def test_script_starts_head_and_workers_and_runs_the_recipe(tmp_path):
    text = render(_job(tmp_path, partition="cpu", time="1-02:00", port=6390))
    lines = text.splitlines()
    assert lines[0] == "#!/bin/bash"
    sbatch = [line for line in lines if line.startswith("#SBATCH")]
    assert sbatch == ["#SBATCH --job-name=curate-text", "#SBATCH --nodes=3", "#SBATCH --ntasks-per-node=1",
                      "#SBATCH --cpus-per-task=8", f"#SBATCH --output={tmp_path}/out/slurm/%x-%j.log",
                      "#SBATCH --partition=cpu", "#SBATCH --time=1-02:00"]
    head = [line for line in lines if line.startswith("ray start --head")]
    assert len(head) == 1 and "--port=6390" in head[0] and '--node-ip-address="$head_ip"' in head[0]
    assert "--include-dashboard=false" in head[0] and "--block" in head[0] and '"${node_opts[@]}"' in head[0]
    workers = [line.strip() for line in lines if "srun" in line]
    assert workers == ['srun --nodes=1 --ntasks=1 --cpus-per-task=8 -w "$node" ray start --block '
                       '--address="$RAY_ADDRESS" "${node_opts[@]}" &']
    [opts] = [line for line in lines if line.startswith("node_opts=(")]
    assert "--num-cpus=8 --num-gpus=0 --temp-dir=\"$ray_tmp\"" in opts and "--disable-usage-stats" in opts
    assert 'ray_tmp=/tmp/ray-"$SLURM_JOB_ID"' in text              # per job, on every node (not only the head)
    assert 'for node in "${nodes[@]:1}"; do' in lines           # every node but the first
    assert 'export RAY_ADDRESS="$head_ip:6390"' in lines
    assert f'curate run {TEXT_DEMO} --out {tmp_path}/out --address "$RAY_ADDRESS"' in lines
    assert "python - 3 0 300 <<'WAIT'" in lines                 # waits for all three nodes (and 0 GPUs)
    assert lines.index("trap stop EXIT") < lines.index(head[0])  # cleanup armed before anything starts
    assert f"# Written by curate {__version__}: curate slurm {TEXT_DEMO} --out {tmp_path}/out --nodes 3 " \
           f"--cpus-per-node 8 --partition cpu --time 1-02:00 --port 6390 --join-timeout 300" in lines


def test_gpus_and_exclusive(tmp_path):
    lines = render(_job(tmp_path, gpus_per_node=4, exclusive=True)).splitlines()
    sbatch = [line for line in lines if line.startswith("#SBATCH")]
    assert "#SBATCH --gpus-per-node=4" in sbatch and "#SBATCH --exclusive" in sbatch
    [opts] = [line for line in lines if line.startswith("node_opts=(")]
    assert "--num-gpus=4" in opts                               # head and workers: `ray start --num-gpus 4`
    [worker] = [line.strip() for line in lines if "srun" in line]
    assert worker.startswith("srun --nodes=1 --ntasks=1 --cpus-per-task=8 --gpus-per-node=4 -w")
    assert "python - 3 4 300 <<'WAIT'" in lines                 # waits for 3 nodes with 12 GPUs


def test_every_ray_port_is_explicit(tmp_path, monkeypatch):
    from curation.commands import slurm
    text = render(_job(tmp_path, port=20000))
    [opts] = [line for line in text.splitlines() if line.startswith("node_opts=(")]
    for flag, port in [("node-manager-port", 20001), ("object-manager-port", 20002),
                       ("dashboard-agent-listen-port", 20003), ("dashboard-agent-grpc-port", 20004),
                       ("runtime-env-agent-port", 20005), ("metrics-export-port", 20006),
                       ("min-worker-port", 20100), ("max-worker-port", 21099)]:
        assert f"--{flag}={port}" in opts
    assert "--ray-client-server-port" not in text               # Ray's client is not installed here: none runs
    monkeypatch.setattr(slurm, "has_ray_client", lambda: True)
    [head] = [line for line in render(_job(tmp_path, port=20000, worker_ports=(30000, 30063))).splitlines()
              if line.startswith("ray start --head")]
    assert "--port=20000 --ray-client-server-port=20007" in head
    text = render(_job(tmp_path, port=20000, worker_ports=(30000, 30063)))
    assert "--min-worker-port=30000 --max-worker-port=30063" in text and "--worker-ports 30000-30063" in text
    assert "--temp-dir" not in head.replace('"${node_opts[@]}"', "")   # the head's temp dir is the nodes' one


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


@pytest.mark.parametrize("kw,says", [
    ({"nodes": 0}, "--nodes and --cpus-per-node must be >= 1"),
    ({"port": 80}, "--port must be in 1024..65528"),
    ({"port": 65530}, "--port must be in 1024..65528"),
    ({"time": "two hours"}, "is not a Slurm time"),
    ({"partition": "cpu; rm -rf /"}, "--partition 'cpu; rm -rf /'"),
    ({"gpus_per_node": -1}, "--gpus-per-node must be in 0..64, got -1"),
    ({"gpus_per_node": 65, "cpus_per_node": 128}, "--gpus-per-node must be in 0..64, got 65"),
    ({"gpus_per_node": 9}, "--gpus-per-node 9 with --cpus-per-node 8: each GPU task also holds a CPU"),
    ({"worker_ports": (6380, 7000)}, "--worker-ports 6380-7000 overlaps Ray's fixed ports 6379-6386"),
    ({"worker_ports": (7000, 7010)}, "--worker-ports 7000-7010 holds 11 ports, fewer than 2 per CPU (16)"),
    ({"worker_ports": (60000, 70000)}, "--worker-ports 60000-70000 is not a range within 1024..65535"),
    ({"port": 65000}, "--worker-ports 65100-66099 is not a range within 1024..65535; give LOW-HIGH (the default"),
    ({"join_timeout": 0}, "--join-timeout must be >= 1 second"),
])
def test_bad_options_are_refused(tmp_path, kw, says):
    job = _job(tmp_path)
    for k, v in kw.items():
        setattr(job, k, v)
    with pytest.raises(UsageError, match=re.escape(says)):   # exit 2
        render(job)


def test_cli_gpu_options(tmp_path, capsys):
    args = ["slurm", str(TEXT_DEMO), "--nodes", "2", "--cpus-per-node", "8", "--out", str(tmp_path), "--dry-run"]
    assert main([*args, "--gpus-per-node", "2", "--exclusive", "--worker-ports", "30000-30999"]) == 0
    text = capsys.readouterr().out
    assert "#SBATCH --gpus-per-node=2" in text and "#SBATCH --exclusive" in text and "--num-gpus=2" in text
    assert "--min-worker-port=30000 --max-worker-port=30999" in text
    assert main([*args, "--worker-ports", "30000"]) == 2
    assert "--worker-ports '30000' is not LOW-HIGH" in capsys.readouterr().err
    assert main([*args, "--gpus-per-node", "9"]) == 2


def test_dry_run_writes_and_prints_the_script(tmp_path, capsys):
    out = tmp_path / "o u t"                                   # a path that needs quoting
    assert main(["slurm", str(TEXT_DEMO), "--nodes", "2", "--cpus-per-node", "4", "--out", str(out), "--dry-run"]) == 0
    script = out / "slurm" / "curate-text.sbatch"
    printed = capsys.readouterr()
    assert printed.out == script.read_text() and f"sbatch '{script}'" in printed.err   # copy-paste safe
    assert os.access(script, os.X_OK)
    assert f"--out '{out}'" in printed.out and f"cd '{out}'" in printed.out


def test_submit_without_sbatch_says_what_to_do(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(CurateError, match="sbatch is not on PATH"):
        submit(tmp_path / "job.sbatch")


# Another host's ports: both "nodes" run on this machine, so the one srun starts takes Ray's ports shifted
# by NODE_B_SHIFT (the same numbers are the head's here); the script gives both the same ones.
NODE_B_SHIFT = 10000
STAND_INS = {
    "scontrol": '#!/bin/sh\n[ "$1 $2" = "show hostnames" ] && printf "node-a\\nnode-b\\n"\n',
    "hostname": '#!/bin/sh\necho 127.0.0.1\n',
    # srun: log its argv, drop its options (`-w NODE` takes a value), shift the node's ports, run it here
    "srun": f"""#!{sys.executable}
import json, os, re, sys
args = sys.argv[1:]
with open(os.environ["STANDIN_LOG"], "a") as f:
    f.write(json.dumps(args) + "\\n")
while args[0].startswith("-"):
    if args.pop(0) == "-w":
        args.pop(0)
args = [re.sub(r"^(--[a-z-]+-port)=(\\d+)$", lambda m: f"{{m[1]}}={{int(m[2]) + {NODE_B_SHIFT}}}", a) for a in args]
os.execvp(args[0], args)
""",
    # this venv's ray and python; curate also samples the TCP ports listening while it runs
    "ray": f'#!/bin/sh\nexec {Path(sys.executable).with_name("ray")} "$@"\n',
    "python": f'#!/bin/sh\nexec {sys.executable} "$@"\n',
    "curate": f"""#!/bin/bash
(while kill -0 $$ 2>/dev/null; do ss -ltnuH >> "$SS_LOG"; sleep 1; done) &
exec {Path(sys.executable).with_name("curate")} "$@"
""",
}


def _listening_ports(ss_log: Path) -> set[int]:
    return {int(line.split()[4].rpartition(":")[2]) for line in ss_log.read_text().splitlines() if line.strip()}


@pytest.mark.slow
def test_script_runs_the_demo_on_two_gpu_nodes(tmp_path):
    """The script end to end: two nodes declaring one GPU each join (the cluster reports 2 GPUs), the demo
    runs to the committed manifests, every port any Ray process listens on is one the script set, every
    node got the per-job temp dir, and nothing is left running."""
    if subprocess.run(["unshare", "-n", "true"], capture_output=True).returncode:
        pytest.skip("needs `unshare -n` (a private network namespace) to keep the nodes on loopback")
    shims = tmp_path / "shims"
    shims.mkdir()
    for name, body in STAND_INS.items():
        (shims / name).write_text(body)
        (shims / name).chmod(0o755)
    job = SlurmJob(recipe=TEXT_DEMO, out=tmp_path / "out", nodes=2, cpus_per_node=1, gpus_per_node=1,
                   join_timeout=120, bin_dir=shims)
    script = tmp_path / "job.sbatch"
    script.write_text(render(job))
    job_id = f"t{os.getpid()}"
    env = {**os.environ, "PATH": f"{shims}:{os.environ['PATH']}", "SLURM_JOB_ID": job_id,
           "SLURM_JOB_NODELIST": "node-[a-b]", "PYTHONPATH": str(REPO), "RAY_TMPDIR": str(tmp_path / "ray"),
           "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "1", "HOME": str(tmp_path),
           "STANDIN_LOG": str(tmp_path / "srun.jsonl"), "SS_LOG": str(tmp_path / "ss.txt")}
    for var in ("RAY_ADDRESS", "RAY_AUTH_MODE", "RAY_AUTH_TOKEN", "RAY_AUTH_TOKEN_PATH"):
        env.pop(var, None)
    try:
        p = subprocess.run(["unshare", "-n", "bash", "-c", f"ip link set lo up && bash {script}"], env=env,
                           capture_output=True, text=True, timeout=1200)
        assert p.returncode == 0, (p.stdout[-2000:], p.stderr[-4000:])
        assert "ray: 2 nodes joined, 2 GPUs" in p.stderr and "cluster: 2 node(s) checked" in p.stderr
        for m in ("stage1", "cooldown", "long-context-4k"):
            assert (job.out / "manifests" / f"{m}.json").read_bytes() == \
                (REPO / "manifests" / "text" / f"{m}.json").read_bytes()
        [srun] = [json.loads(line) for line in (tmp_path / "srun.jsonl").read_text().splitlines()]
        assert srun[srun.index("-w") + 1] == "node-b" and "--gpus-per-node=1" in srun
        assert {"--num-gpus=1", f"--temp-dir=/tmp/ray-{job_id}"} <= set(srun)
        lo, hi = job.workers()
        head = {job.port, *(job.port + off for off in NODE_PORTS.values()), *range(lo, hi + 1)}
        node_b = {port + NODE_B_SHIFT for port in head - {job.port}}
        seen = _listening_ports(tmp_path / "ss.txt")
        assert {job.port, job.port + 1, job.port + 1 + NODE_B_SHIFT} <= seen   # both nodes were sampled
        assert seen - head - node_b == set()                     # no port Ray chose by itself
        assert not (job.out / "slurm" / f"job-{job_id}").exists()   # the token went with the job
        left = subprocess.run(["pgrep", "-f", f"/tmp/ray-{job_id}"], capture_output=True, text=True).stdout.split()
        assert left == []                                        # every Ray process stopped
    finally:
        shutil.rmtree(f"/tmp/ray-{job_id}", ignore_errors=True)
