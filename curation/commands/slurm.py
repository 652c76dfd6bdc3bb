"""`curate slurm RECIPE --nodes N --cpus-per-node C`: an sbatch script that runs a recipe on Ray.

The script, run by Slurm on the allocation's first node:
1. puts the generating installation's `bin/` first on PATH (every node must have curate installed at
   that path, as for any Ray cluster; see README, "Running on a cluster");
2. writes a fresh random Ray token for the job into `OUT/slurm/job-$SLURM_JOB_ID/auth_token`
   (mode 600, on the shared output folder, so every node reads the same file) and exports
   `RAY_AUTH_MODE=token` and `RAY_AUTH_TOKEN_PATH`; the token never appears in the script or a log;
3. starts the Ray head on the first node (`ray start --head --block`, in the background) and one
   worker per other node with `srun --nodes=1 --ntasks=1 -w NODE ray start --address HEAD:PORT --block`;
4. waits until all N nodes have joined (or fails after `--join-timeout` seconds);
5. runs `curate run RECIPE --out OUT --address HEAD:PORT` from OUT (Ray puts the driver's working
   directory on every worker's sys.path; a source checkout there would shadow the installed curate);
6. stops the cluster on exit, also on failure (a trap terminates the `ray start --block` steps,
   which stop their Ray processes) and removes the token.
"""
from __future__ import annotations

import re
import shlex
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from curation import __version__
from curation.errors import CurateError

_TIME = re.compile(r"^(\d+|\d+:\d{2}(:\d{2})?|\d+-\d+(:\d{2}(:\d{2})?)?)$")


@dataclass
class SlurmJob:
    recipe: Path
    out: Path
    nodes: int
    cpus_per_node: int
    partition: str | None = None
    time: str | None = None
    job_name: str | None = None
    port: int = 6379
    join_timeout: int = 300
    bin_dir: Path = Path(sys.executable).parent

    def check(self) -> None:
        if self.nodes < 1 or self.cpus_per_node < 1:
            raise CurateError(f"--nodes and --cpus-per-node must be >= 1, got {self.nodes} and {self.cpus_per_node}")
        if not 1024 <= self.port <= 65535:
            raise CurateError(f"--port must be in 1024..65535, got {self.port}")
        if self.time is not None and not _TIME.match(self.time):
            raise CurateError(f"--time {self.time!r} is not a Slurm time (MM, HH:MM:SS, D-HH:MM)")
        for name, value in (("--partition", self.partition), ("--job-name", self.job_name)):
            if value is not None and not re.fullmatch(r"[\w.+-]+", value):
                raise CurateError(f"{name} {value!r}: use letters, digits and . _ + - only")


def render(job: SlurmJob) -> str:
    """The batch script's text (deterministic for a given job)."""
    job.check()
    q = shlex.quote
    name = job.job_name or f"curate-{job.recipe.stem}"
    slurm_dir = job.out / "slurm"
    lines = [
        "#!/bin/bash",
        f"#SBATCH --job-name={name}",
        f"#SBATCH --nodes={job.nodes}",
        "#SBATCH --ntasks-per-node=1",
        f"#SBATCH --cpus-per-task={job.cpus_per_node}",
        f"#SBATCH --output={slurm_dir}/%x-%j.log",
        *([f"#SBATCH --partition={job.partition}"] if job.partition else []),
        *([f"#SBATCH --time={job.time}"] if job.time else []),
        f"# Written by curate {__version__}: curate slurm {q(str(job.recipe))} --nodes {job.nodes} "
        f"--cpus-per-node {job.cpus_per_node}",
        "set -euo pipefail",
        f"export PATH={q(str(job.bin_dir))}:\"$PATH\"   # curate and ray of the installation that wrote this",
        "export RAY_USAGE_STATS_ENABLED=0",
        "",
        "# A fresh token for this job on the shared output folder: every node reads the same file.",
        f"job_dir={q(str(slurm_dir))}/job-\"$SLURM_JOB_ID\"",
        "mkdir -p \"$job_dir\" && chmod 700 \"$job_dir\"",
        "export RAY_AUTH_MODE=token RAY_AUTH_TOKEN_PATH=\"$job_dir/auth_token\"",
        "(umask 077 && python -c 'import secrets; print(secrets.token_hex(32))' > \"$RAY_AUTH_TOKEN_PATH\")",
        "",
        "mapfile -t nodes < <(scontrol show hostnames \"$SLURM_JOB_NODELIST\")",
        "head_ip=$(hostname --ip-address | awk '{print $1}')   # this script runs on the first node",
        f"export RAY_ADDRESS=\"$head_ip:{job.port}\"",
        "",
        "steps=()",
        "stop() {   # SIGTERM to `ray start --block` stops that node's Ray processes",
        "    kill -TERM \"${steps[@]}\" 2>/dev/null || true",
        "    wait \"${steps[@]}\" 2>/dev/null || true",
        "    rm -rf \"$job_dir\"",
        "}",
        "trap stop EXIT",
        "",
        f"ray start --head --block --node-ip-address=\"$head_ip\" --port={job.port} "
        f"--num-cpus={job.cpus_per_node} --include-dashboard=false --disable-usage-stats "
        f"--temp-dir=/tmp/ray-\"$SLURM_JOB_ID\" &",
        "steps+=($!)",
        "for node in \"${nodes[@]:1}\"; do",
        f"    srun --nodes=1 --ntasks=1 --cpus-per-task={job.cpus_per_node} -w \"$node\" "
        f"ray start --block --address=\"$RAY_ADDRESS\" "
        f"--num-cpus={job.cpus_per_node} --disable-usage-stats &",
        "    steps+=($!)",
        "done",
        "",
        f"python - {job.nodes} {job.join_timeout} <<'WAIT'",
        "import sys, time",
        "import ray",
        "want, timeout = int(sys.argv[1]), float(sys.argv[2])",
        "deadline = time.monotonic() + timeout",
        "while True:",
        "    try:",
        "        ray.init(logging_level='ERROR', log_to_driver=False)   # RAY_ADDRESS, RAY_AUTH_*",
        "        break",
        "    except ConnectionError:",
        "        if time.monotonic() > deadline: sys.exit(f'the Ray head did not start within {timeout:.0f} s')",
        "        time.sleep(2)",
        "while (alive := sum(n['Alive'] for n in ray.nodes())) < want:",
        "    if time.monotonic() > deadline:",
        "        sys.exit(f'{alive} of {want} Ray nodes joined within {timeout:.0f} s; see the node logs')",
        "    time.sleep(2)",
        "print(f'ray: {alive} nodes joined', file=sys.stderr)",
        "WAIT",
        "",
        f"cd {q(str(job.out))}   # not a source checkout: Ray puts the driver's cwd on workers' sys.path",
        f"curate run {q(str(job.recipe))} --out {q(str(job.out))} --address \"$RAY_ADDRESS\"",
        "",
    ]
    return "\n".join(lines)


def write_script(job: SlurmJob, script: Path | None = None) -> Path:
    path = script or job.out / "slurm" / f"{job.job_name or 'curate-' + job.recipe.stem}.sbatch"
    (job.out / "slurm").mkdir(parents=True, exist_ok=True)   # Slurm does not create --output's folder
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(render(job))
    path.chmod(0o755)
    return path


def submit(script: Path) -> str:
    """`sbatch SCRIPT`; returns sbatch's answer (the job id line)."""
    sbatch = shutil.which("sbatch")
    if sbatch is None:
        raise CurateError(f"sbatch is not on PATH; the script is {script}: copy it to a Slurm login node "
                          f"and run `sbatch {script.name}`, or use --dry-run to only write it")
    p = subprocess.run([sbatch, str(script)], capture_output=True, text=True)
    if p.returncode:
        raise CurateError(f"sbatch {script} failed: {p.stderr.strip() or p.stdout.strip()}")
    return p.stdout.strip()
