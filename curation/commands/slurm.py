"""`curate slurm RECIPE --nodes N --cpus-per-node C [--gpus-per-node G]`: an sbatch script that runs a
recipe on Ray, following Ray's "Deploying on Slurm" pattern (one task per node, every port explicit).

The script, run by Slurm on the allocation's first node:
1. puts the generating installation's `bin/` first on PATH (every node must have curate installed at
   that path, as for any Ray cluster; see README, "Running on a cluster");
2. writes a fresh random Ray token for the job into `OUT/slurm/job-$SLURM_JOB_ID/auth_token`
   (mode 600, on the shared output folder, so every node reads the same file) and exports
   `RAY_AUTH_MODE=token` and `RAY_AUTH_TOKEN_PATH`; the token never appears in the script or a log;
3. starts the Ray head on the first node (`ray start --head --block`, in the background) and one
   worker per other node with `srun --nodes=1 --ntasks=1 -w NODE ray start --address HEAD:PORT --block`;
   every node declares the job's CPUs and GPUs (`--num-gpus`, 0 without `--gpus-per-node`, so Ray
   never claims GPUs Slurm did not allocate), uses its own per-job temp dir `/tmp/ray-$SLURM_JOB_ID`
   (node-local: sockets, logs, spilled objects) and the fixed ports of `ray_ports`, so that two jobs
   sharing a node (without `--exclusive`) with different `--port` never collide;
4. waits until all N nodes with their GPUs have joined (or fails after `--join-timeout` seconds);
5. runs `curate run RECIPE --out OUT --address HEAD:PORT` from OUT (Ray puts the driver's working
   directory on every worker's sys.path; a source checkout there would shadow the installed curate);
6. stops the cluster on exit, also on failure (a trap terminates the `ray start --block` steps,
   which stop their Ray processes) and removes the token.

Everything from the user that reaches the script is refused or quoted: names (job, partition) are
restricted to Slurm's plain characters; paths are `shlex.quote`d in shell words and quoted for sbatch's
own parser in `#SBATCH` lines; control characters, which neither a comment nor an `#SBATCH` line can
hold, are refused with exit 2.
"""
from __future__ import annotations

import importlib.util
import re
import shlex
import shutil
import subprocess
import sys
import unicodedata
from dataclasses import dataclass
from pathlib import Path

from curation import __version__
from curation.commands.console import UsageError
from curation.errors import CurateError

_TIME = re.compile(r"\d+|\d+:\d{2}(:\d{2})?|\d+-\d+(:\d{2}(:\d{2})?)?")
_NAME = re.compile(r"[A-Za-z0-9._+-]{1,128}")
_PARTITION = re.compile(r"[A-Za-z0-9._+-]+(,[A-Za-z0-9._+-]+)*")
_SBATCH_PLAIN = re.compile(r"[A-Za-z0-9._+/%=:,@-]+")
MAX_GPUS_PER_NODE = 64

# Ray's ports on every node, as offsets from the head's GCS port (`--port`): Ray's Slurm guide asks for
# all of them explicitly, else Ray picks random ones that another job on the node may hold.
NODE_PORTS = {"node-manager-port": 1, "object-manager-port": 2, "dashboard-agent-listen-port": 3,
              "dashboard-agent-grpc-port": 4, "runtime-env-agent-port": 5, "metrics-export-port": 6}
CLIENT_PORT = 7        # the head's Ray client server, when the installation has Ray's client (grpc)
WORKER_PORTS_FROM = 100  # default worker ports: port+100 on, 1000 of them or 4 per CPU when that is more


def refuse_controls(what: str, value: str) -> None:
    """Control characters (C0, DEL, C1) and line separators end an `#SBATCH` line or the comment that
    carries the command; no quoting makes them safe there, so the value is refused."""
    for ch in value:
        if unicodedata.category(ch) in ("Cc", "Zl", "Zp"):
            name = unicodedata.name(ch, {"\n": "newline", "\r": "carriage return", "\0": "NUL"}.get(ch, "control"))
            raise UsageError(f"{what} {value!r} contains the control character U+{ord(ch):04X} ({name.lower()}), "
                             f"which cannot be written safely into a Slurm script; rename it")


def sbatch_word(value: str) -> str:
    """`value` as one argument of an `#SBATCH` line: sbatch splits those at whitespace, honours quotes and
    backslash escapes, and takes an unquoted `#` as a comment (`_get_argument` in Slurm's sbatch)."""
    if _SBATCH_PLAIN.fullmatch(value):
        return value
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


def job_name_for(recipe: Path) -> str:
    """The default job name, `curate-<recipe stem>`, with every run of characters outside Slurm's
    plain ones made a `-` (the name is also the script's file name)."""
    stem = re.sub(r"[^A-Za-z0-9._+-]+", "-", recipe.stem).strip("-.")
    return f"curate-{stem}"[:128] if stem else "curate"


def parse_port_range(text: str | None) -> tuple[int, int] | None:
    """`--worker-ports LOW-HIGH`; None stays None (the default range)."""
    if text is None:
        return None
    m = re.fullmatch(r"(\d{1,5})-(\d{1,5})", text.strip())
    if not m:
        raise UsageError(f"--worker-ports {text!r} is not LOW-HIGH (two port numbers, e.g. 20000-20999)")
    return int(m[1]), int(m[2])


def has_ray_client() -> bool:
    """Whether `ray start --head` here starts a Ray client server (Ray's own test: grpc is importable)."""
    return importlib.util.find_spec("grpc") is not None


@dataclass
class SlurmJob:
    recipe: Path
    out: Path
    nodes: int
    cpus_per_node: int
    gpus_per_node: int = 0
    exclusive: bool = False
    partition: str | None = None
    time: str | None = None
    job_name: str | None = None
    port: int = 6379
    worker_ports: tuple[int, int] | None = None
    join_timeout: int = 300
    bin_dir: Path = Path(sys.executable).parent

    @property
    def name(self) -> str:
        return self.job_name or job_name_for(self.recipe)

    def workers(self) -> tuple[int, int]:
        if self.worker_ports:
            return self.worker_ports
        first = self.port + WORKER_PORTS_FROM
        return first, first + max(1000, 4 * self.cpus_per_node) - 1

    def check(self) -> None:
        for what, path in (("the recipe path", self.recipe), ("--out", self.out),
                           ("the installation's bin folder", self.bin_dir)):
            refuse_controls(what, str(path))
            if not Path(path).is_absolute():
                raise UsageError(f"{what} {str(path)!r} must be an absolute path")
        for what, value in (("--partition", self.partition), ("--job-name", self.job_name), ("--time", self.time)):
            if value is not None:
                refuse_controls(what, value)
        if "\\" in str(self.out):
            raise UsageError(f"--out {str(self.out)!r} contains a backslash, which stops Slurm from expanding "
                             f"%x and %j in the job's log name (#SBATCH --output); use a folder without one")
        if ":" in str(self.bin_dir):
            raise UsageError(f"the installation's bin folder {str(self.bin_dir)!r} contains ':', which splits "
                             f"PATH; install curate under a path without one")
        if self.nodes < 1 or self.cpus_per_node < 1:
            raise UsageError(f"--nodes and --cpus-per-node must be >= 1, got {self.nodes} and {self.cpus_per_node}")
        if not 0 <= self.gpus_per_node <= MAX_GPUS_PER_NODE:
            raise UsageError(f"--gpus-per-node must be in 0..{MAX_GPUS_PER_NODE}, got {self.gpus_per_node}")
        if self.gpus_per_node > self.cpus_per_node:
            raise UsageError(f"--gpus-per-node {self.gpus_per_node} with --cpus-per-node {self.cpus_per_node}: "
                             f"each GPU task also holds a CPU (it decodes while the GPU encodes), so some GPUs "
                             f"would idle; give at least as many CPUs as GPUs per node")
        if self.join_timeout < 1:
            raise UsageError(f"--join-timeout must be >= 1 second, got {self.join_timeout}")
        self._check_ports()
        if self.time is not None and not _TIME.fullmatch(self.time):
            raise UsageError(f"--time {self.time!r} is not a Slurm time (MM, HH:MM:SS, D-HH:MM)")
        if self.partition is not None and not _PARTITION.fullmatch(self.partition):
            raise UsageError(f"--partition {self.partition!r}: use letters, digits and . _ + - only (a comma "
                             f"between partitions)")
        if self.job_name is not None and not _NAME.fullmatch(self.job_name):
            raise UsageError(f"--job-name {self.job_name!r}: use up to 128 letters, digits and . _ + - only")

    def _check_ports(self) -> None:
        fixed = self.port + CLIENT_PORT
        if not 1024 <= self.port or fixed > 65535:
            raise UsageError(f"--port must be in 1024..{65535 - CLIENT_PORT} (Ray's other ports follow it, up "
                             f"to port+{CLIENT_PORT}), got {self.port}")
        lo, hi = self.workers()
        if lo > hi or lo < 1024 or hi > 65535:
            raise UsageError(f"--worker-ports {lo}-{hi} is not a range within 1024..65535; give LOW-HIGH"
                             + ("" if self.worker_ports else f" (the default follows --port {self.port})"))
        if lo <= fixed and self.port <= hi:
            raise UsageError(f"--worker-ports {lo}-{hi} overlaps Ray's fixed ports {self.port}-{fixed} "
                             f"(--port and the {CLIENT_PORT} after it); move one of them")
        if hi - lo + 1 < 2 * self.cpus_per_node:
            raise UsageError(f"--worker-ports {lo}-{hi} holds {hi - lo + 1} ports, fewer than 2 per CPU "
                             f"({2 * self.cpus_per_node}); every Ray worker process binds one")

    def node_ports(self) -> list[str]:
        """The `ray start` port options of every node."""
        lo, hi = self.workers()
        return [*(f"--{name}={self.port + off}" for name, off in NODE_PORTS.items()),
                f"--min-worker-port={lo}", f"--max-worker-port={hi}"]

    def head_ports(self) -> list[str]:
        """The head's own: its GCS port, and its Ray client server's when this installation has one."""
        return [f"--port={self.port}", *([f"--ray-client-server-port={self.port + CLIENT_PORT}"]
                                         if has_ray_client() else [])]

    def command(self) -> str:
        """The `curate slurm` command line that writes this script (for its comment line)."""
        q = shlex.quote
        words = ["curate", "slurm", q(str(self.recipe)), "--out", q(str(self.out)), "--nodes", str(self.nodes),
                 "--cpus-per-node", str(self.cpus_per_node)]
        words += ["--gpus-per-node", str(self.gpus_per_node)] if self.gpus_per_node else []
        words += ["--exclusive"] if self.exclusive else []
        for opt, value in (("--partition", self.partition), ("--time", self.time), ("--job-name", self.job_name)):
            words += [opt, q(value)] if value is not None else []
        words += ["--port", str(self.port)] + (["--worker-ports", "-".join(map(str, self.worker_ports))]
                                               if self.worker_ports else [])
        return " ".join(words + ["--join-timeout", str(self.join_timeout)])


def render(job: SlurmJob) -> str:
    """The batch script's text (deterministic for a given job and installation)."""
    job.check()
    q = shlex.quote
    slurm_dir = job.out / "slurm"
    gpus = job.gpus_per_node
    log = str(slurm_dir).replace("%", "%%") + "/%x-%j.log"   # %x, %j: Slurm's job name and id
    node_opts = [f"--num-cpus={job.cpus_per_node}", f"--num-gpus={gpus}", '--temp-dir="$ray_tmp"',
                 *job.node_ports(), "--disable-usage-stats"]
    lines = [
        "#!/bin/bash",
        f"#SBATCH --job-name={job.name}",
        f"#SBATCH --nodes={job.nodes}",
        "#SBATCH --ntasks-per-node=1",
        f"#SBATCH --cpus-per-task={job.cpus_per_node}",
        *([f"#SBATCH --gpus-per-node={gpus}"] if gpus else []),
        *(["#SBATCH --exclusive"] if job.exclusive else []),
        f"#SBATCH --output={sbatch_word(log)}",
        *([f"#SBATCH --partition={job.partition}"] if job.partition else []),
        *([f"#SBATCH --time={job.time}"] if job.time else []),
        f"# Written by curate {__version__}: {job.command()}",
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
        "ray_tmp=/tmp/ray-\"$SLURM_JOB_ID\"   # on every node its own: Ray's sockets, logs and spilled objects",
        f"node_opts=({' '.join(node_opts)})",
        "",
        "steps=()",
        "stop() {   # SIGTERM to `ray start --block` stops that node's Ray processes",
        "    kill -TERM \"${steps[@]}\" 2>/dev/null || true",
        "    wait \"${steps[@]}\" 2>/dev/null || true",
        "    rm -rf \"$job_dir\"",
        "}",
        "trap stop EXIT",
        "",
        "ray start --head --block --node-ip-address=\"$head_ip\" --include-dashboard=false "
        f"{' '.join(job.head_ports())} \"${{node_opts[@]}}\" &",
        "steps+=($!)",
        "for node in \"${nodes[@]:1}\"; do",
        f"    srun --nodes=1 --ntasks=1 --cpus-per-task={job.cpus_per_node} "
        f"{f'--gpus-per-node={gpus} ' if gpus else ''}-w \"$node\" "
        "ray start --block --address=\"$RAY_ADDRESS\" \"${node_opts[@]}\" &",
        "    steps+=($!)",
        "done",
        "",
        f"python - {job.nodes} {gpus} {job.join_timeout} <<'WAIT'",
        "import sys, time",
        "import ray",
        "want, gpus, timeout = int(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3])",
        "deadline = time.monotonic() + timeout",
        "while True:",
        "    try:",
        "        ray.init(logging_level='ERROR', log_to_driver=False)   # RAY_ADDRESS, RAY_AUTH_*",
        "        break",
        "    except ConnectionError:",
        "        if time.monotonic() > deadline: sys.exit(f'the Ray head did not start within {timeout:.0f} s')",
        "        time.sleep(2)",
        "def joined():",
        "    alive = [n for n in ray.nodes() if n['Alive']]",
        "    return len(alive), sum(n['Resources'].get('GPU', 0) for n in alive)",
        "while (got := joined())[0] < want or got[1] < want * gpus:",
        "    if time.monotonic() > deadline:",
        "        sys.exit(f'{got[0]} of {want} Ray nodes ({got[1]:g} of {want * gpus} GPUs) joined within '",
        "                 f'{timeout:.0f} s; see the node logs')",
        "    time.sleep(2)",
        "print(f'ray: {got[0]} nodes joined, {got[1]:g} GPUs', file=sys.stderr)",
        "WAIT",
        "",
        f"cd {q(str(job.out))}   # not a source checkout: Ray puts the driver's cwd on workers' sys.path",
        f"curate run {q(str(job.recipe))} --out {q(str(job.out))} --address \"$RAY_ADDRESS\"",
        "",
    ]
    return "\n".join(lines)


def write_script(job: SlurmJob, script: Path | None = None) -> Path:
    """Write the script (default `OUT/slurm/<job name>.sbatch`; the name holds plain characters only)."""
    text = render(job)
    path = script or job.out / "slurm" / f"{job.name}.sbatch"
    (job.out / "slurm").mkdir(parents=True, exist_ok=True)   # Slurm does not create --output's folder
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    path.chmod(0o755)
    return path


def submit(script: Path) -> str:
    """`sbatch SCRIPT`; returns sbatch's answer (the job id line)."""
    sbatch = shutil.which("sbatch")
    if sbatch is None:
        raise CurateError(f"sbatch is not on PATH; the script is {script}: copy it to a Slurm login node "
                          f"and run `sbatch {shlex.quote(script.name)}`, or use --dry-run to only write it")
    p = subprocess.run([sbatch, str(script)], capture_output=True, text=True)
    if p.returncode:
        raise CurateError(f"sbatch {script} failed: {p.stderr.strip() or p.stdout.strip()}")
    return p.stdout.strip()
