"""Kill a tokenize task mid-way, as the OOM killer would, and count what a resumed task re-encodes."""
from __future__ import annotations

import importlib
import multiprocessing
import os
import signal


def tokenize_shard(recipe, out, source: str, codec: str, kill_at_batch: int = 0) -> int:
    """Run one source's tokenize task in this process; the codec class `codec` ("module:Class") counts its
    `encode` calls and SIGKILLs the process at call `kill_at_batch` (1-based; 0: never). Returns the calls."""
    import torch

    from curation.plan.graph import load_plan
    from curation.runtime.node import run_node
    torch.set_num_threads(1)   # as in a Ray worker (OMP_NUM_THREADS=1): float sums, hence codes, match
    module, name = codec.split(":")
    cls = getattr(importlib.import_module(module), name)
    calls, encode = [], cls.encode

    def counting(self, batch):
        calls.append(len(batch))
        if len(calls) == kill_at_batch:
            os.kill(os.getpid(), signal.SIGKILL)
        return encode(self, batch)

    cls.encode = counting
    try:
        [node] = [n for n in load_plan(recipe).tokenize if n.source == source]
        run_node(str(out), node)
    finally:
        cls.encode = encode
    return len(calls)


def killed_worker(recipe, out, source: str, codec: str, kill_at_batch: int) -> int:
    """`tokenize_shard` in a spawned worker that kills itself; returns the worker's exit code."""
    child = multiprocessing.get_context("spawn").Process(target=tokenize_shard,
                                                         args=(recipe, out, source, codec, kill_at_batch))
    child.start()
    child.join(timeout=300)
    return child.exitcode
