"""What one task needs from the scheduler: CPUs, GPUs, memory, and the device its codec asks for.

A step declares its `Resources` (`curation.steps.base.StepSpec.resources`, as NeMo Curator's stages
declare `resources`); the plan copies the tokenize step's onto its node (`Node.resources`, plain JSON so
it travels with the node), and an executor turns them into its scheduler's request (`ray_options`).

    Resources()                                  # one CPU: every task that runs no codec
    Resources(device="cuda")                     # one CPU and one whole GPU: one task per GPU
    Resources(device="auto")                     # a GPU when the cluster has one, else a CPU only

`device` is the recipe's request (`images.device`, `audio.device`: cpu, cuda or auto). Where the codec
actually runs is decided inside the task by what torch sees there (`curation.steps.device.place`), so a
task that Ray put on a declared-but-absent GPU (a test cluster started with `--num-gpus`) runs on the CPU
and the ledger says so.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass

from curation.errors import CurateError

DEVICES = ("cpu", "cuda", "auto")
PRECISIONS = ("tf32", "float32", "bfloat16")   # on CUDA; a CPU always encodes in float32


@dataclass(frozen=True)
class Resources:
    cpus: float = 1.0
    memory: int | None = None    # bytes Ray reserves for the task (None: no reservation)
    device: str = "cpu"          # the codec's requested device: cpu, cuda or auto

    def __post_init__(self):
        if self.device not in DEVICES:
            raise ValueError(f"device {self.device!r}: one of {', '.join(DEVICES)}")
        if self.cpus <= 0:
            raise ValueError(f"cpus {self.cpus}: must be positive")

    @property
    def wants_gpu(self) -> bool:
        return self.device != "cpu"

    def to_json(self) -> dict:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict | None) -> Resources:
        return cls(**(data or {}))

    def describe(self) -> str:
        """One token for `curate explain --nodes`: `cpus=1,gpus=0`, `cpus=1,gpus=1(cuda)`, `cpus=1,gpus=auto`."""
        gpus = {"cpu": "0", "cuda": "1", "auto": "auto"}[self.device]
        mem = f",memory={self.memory}" if self.memory else ""
        return f"cpus={self.cpus:g},gpus={gpus}{mem}"


def merged(*requests: Resources) -> Resources:
    """One task running several codecs: the most CPUs and memory, and a GPU if any asks (cuda before auto)."""
    device = "cuda" if any(r.device == "cuda" for r in requests) else \
        "auto" if any(r.device == "auto" for r in requests) else "cpu"
    memories = [r.memory for r in requests if r.memory]
    return Resources(cpus=max((r.cpus for r in requests), default=1.0), memory=max(memories) if memories else None,
                     device=device)


def ray_options(resources: dict | None, cluster_gpus: float, key: str = "") -> dict:
    """Ray's `.options(...)` for a node's resources on a cluster holding `cluster_gpus` GPUs in all.

    A GPU task asks for one whole GPU (`num_gpus=1`), so Ray runs at most one per GPU and sets its
    `CUDA_VISIBLE_DEVICES`. `auto` on a cluster without GPUs asks for none; `cuda` there is refused
    before anything runs, since Ray would wait for ever on a request no node can meet."""
    r = Resources.from_json(resources)
    options: dict = {"num_cpus": r.cpus}
    if r.memory:
        options["memory"] = int(r.memory)
    if r.device == "cuda" or (r.device == "auto" and cluster_gpus > 0):
        if cluster_gpus <= 0:
            raise CurateError(f"task {key or '?'} asks for a GPU (`device: cuda`) but the Ray cluster has none; "
                              f"start its nodes with `ray start --num-gpus N` (or `curate slurm --gpus-per-node N`), "
                              f"or set the source's `device: auto` (GPU when there is one) or `cpu`")
        options["num_gpus"] = 1
    return options
