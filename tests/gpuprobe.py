"""Probe what the Ray executor asks for, on a cluster: `python -m tests.gpuprobe ADDRESS N RESULT.json`.

Maps N probe tasks through `RayExecutor.map` with the codec tasks' resources (`device: auto`), as
`curate run` does, and writes what each task found: its node, the GPU ids Ray gave it, its
CUDA_VISIBLE_DEVICES, where `curation.steps.device.place` put the codec, and when it ran (to count the
tasks that held a GPU at once). Run by tests/runtime/test_simulated_gpus.py inside its cluster's
network namespace."""
from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path


def probe(i: int) -> dict:
    import ray

    from curation.steps.device import place
    start = time.time()
    p = place("image", "auto", "tf32", "probe")
    time.sleep(1.5)   # long enough for tasks that could share a GPU to overlap
    return {"i": i, "node": ray.get_runtime_context().get_node_id(), "gpu_ids": [str(g) for g in ray.get_gpu_ids()],
            "visible": os.environ.get("CUDA_VISIBLE_DEVICES", ""), "device": p.device, "precision": p.precision,
            "start": start, "end": time.time()}


def main(address: str, n: str, result: str) -> int:
    import ray

    from curation.core.resources import Resources
    from curation.runtime.ray_executor import RayExecutor
    with RayExecutor(address=address, progress=False) as ex:
        nodes = {n["NodeID"]: {"name": n.get("NodeName"), "gpus": n["Resources"].get("GPU", 0),
                               "cpus": n["Resources"].get("CPU", 0)} for n in ray.nodes() if n["Alive"]}
        calls = [(f"tokenize/probe/{i:02d}", (i,)) for i in range(int(n))]
        auto = Resources(device="auto").to_json()
        got = ex.map(probe, calls, "probe", resources={k: auto for k, _ in calls})
        cpu_only = ex.map(probe, calls[:2], "probe-cpu", resources={})
        cluster_gpus = ex.gpus
    Path(result).write_text(json.dumps({"nodes": nodes, "gpu_tasks": list(got.values()),
                                        "cpu_tasks": list(cpu_only.values()), "cluster_gpus": cluster_gpus}))
    return 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:]))
