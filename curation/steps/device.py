"""Where a codec runs inside its task, and at which precision: the precision contract.

`place(kind, requested, precision)` decides from what torch sees in this process, not from what the
scheduler was asked for: Ray sets `CUDA_VISIBLE_DEVICES` for a task holding a GPU, but a test cluster
declares GPUs that do not exist (`ray start --num-gpus 2` on a CPU machine), and there a task placed on
a "GPU" encodes on the CPU, and its `Placement` says so (the ledger's `encoders` table).

    requested   torch sees CUDA      no CUDA in the task
    cpu         cpu, float32         cpu, float32
    auto        cuda, <precision>    cpu, float32
    cuda        cuda, <precision>    refused (InputError naming the source's setting)

The contract: a CPU encodes in float32 (one intra-op thread, `curation.steps.encode.one_thread`); CUDA in
TF32 unless the recipe says `precision: float32` (TF32 off) or `bfloat16` (autocast). Codes are an
argmin over near-ties, so precision decides codes: it is in the tokenize node's fingerprint whenever
the recipe asks for a GPU (`curation.steps.image.modality`), and a manifest whose parts mix precisions
is reported by `curate verify`.

`on_device(codec, ...)` gives the codec to call and its placement: on the CPU the codec itself, on CUDA
an `OnDevice` copy behind the same interface (CPU tensors in, CPU codes out).
"""
from __future__ import annotations

import os
from contextlib import contextmanager
from dataclasses import asdict, dataclass

from curation.core.resources import Resources, merged
from curation.errors import InputError


@dataclass(frozen=True)
class Placement:
    kind: str              # image or audio: which codec
    requested: str         # the recipe's device: cpu, cuda or auto
    device: str            # where it ran: cpu or cuda
    precision: str         # float32 (CPU, or CUDA with TF32 off), tf32 or bfloat16
    device_name: str       # "cpu" or the GPU's name
    gpus: str              # the task's CUDA_VISIBLE_DEVICES ("" when none: also a declared-only GPU slot)

    def to_json(self) -> dict:
        return asdict(self)


def place(kind: str, requested: str, precision: str = "tf32", source: str = "") -> Placement:
    """Where this task's `kind` codec runs (see the module's table)."""
    import torch
    visible = os.environ.get("CUDA_VISIBLE_DEVICES", "")
    if requested != "cpu" and torch.cuda.is_available():
        return Placement(kind, requested, "cuda", precision, torch.cuda.get_device_name(0), visible)
    if requested == "cuda":
        raise InputError(f"source {source!r}: its {kind} codec asks for `device: cuda` but torch sees no CUDA device "
                         f"in this task (CUDA_VISIBLE_DEVICES={visible!r}, torch {torch.__version__}); install a "
                         f"CUDA build of torch on the GPU nodes, or set `device: auto` (the CPU when there is no GPU)")
    return Placement(kind, requested, "cpu", "float32", "cpu", visible)


@contextmanager
def _precision(precision: str):
    """TF32 on or off for CUDA matmuls and convolutions (restored after), or bfloat16 autocast."""
    import torch
    flags = torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32
    tf32 = precision == "tf32"
    torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = tf32
    try:
        with torch.autocast("cuda", dtype=torch.bfloat16, enabled=precision == "bfloat16"):
            yield
    finally:
        torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = flags


class OnDevice:
    """A codec copied to CUDA, with the CPU interface the tokenize steps call (CPU tensors in, CPU codes out;
    every other attribute is the codec's). The cached CPU codec stays as it is for other tasks of the worker."""

    def __init__(self, codec, placement: Placement):
        import copy
        self.placement = placement
        self._codec = copy.deepcopy(codec).to("cuda")

    def __getattr__(self, name):
        return getattr(self._codec, name)

    def encode(self, x):
        import torch
        with torch.no_grad(), _precision(self.placement.precision):
            return self._codec.encode(x.to("cuda", non_blocking=True)).cpu()


def on_device(codec, kind: str, requested: str, precision: str, source: str = ""):
    """(codec to call, its placement): on the CPU the codec itself, untouched, so CPU codes stay what they were."""
    placement = place(kind, requested, precision, source)
    return (codec if placement.device == "cpu" else OnDevice(codec, placement)), placement


def device_settings(block) -> dict:
    """What a codec's device request adds to its encoder's settings (so to the tokenize fingerprint): nothing
    for the CPU (float32, as every earlier version), else the requested device and the CUDA precision."""
    device = block.codec_device()
    return {} if device == "cpu" else {"device": device, "precision": block.codec_precision()}


def device_resources(*blocks) -> Resources:
    """The task's resources for the codecs it runs (`images:` / `audio:` settings blocks)."""
    return merged(*(Resources(device=b.codec_device()) for b in blocks))


def placed(step, codecs: dict):
    """Place each codec of a built encoder step, {attribute: (kind, settings block)}: swap the attribute for
    the codec to call and keep the placements on the step (`step.placements`, read into the ledger)."""
    step.placements = []
    for attr, (kind, block) in codecs.items():
        codec = getattr(step, attr)
        if codec is None:
            continue
        runner, placement = on_device(codec, kind, block.codec_device(), block.codec_precision(), step.source)
        setattr(step, attr, runner)
        step.placements.append(placement)
    return step
