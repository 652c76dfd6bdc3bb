"""Codec tasks on GPUs, proven on this CPU machine with GPUs declared to Ray (`ray start --num-gpus`): a head
without GPUs and a node with two simulated ones. The codec tasks of `device: auto` are placed on the GPU
node, each holding one GPU, never two at once on one GPU; inside them torch sees no CUDA, so the codec runs
on the CPU and the ledger says so (`encoders`: device cpu, float32, and the GPU slot Ray gave the task),
and the shards are the bytes of the local run. `device: cuda` on a cluster without GPUs is refused before
any task runs.

The nodes run in a private network namespace (tests/raystart.py): loopback only, every node on 127.0.0.1
with its own temp dir, stopped by the plan even when a step fails."""
from __future__ import annotations

import json
import secrets
import shutil
import subprocess
import sys
import tempfile

import numpy as np
import pyarrow.parquet as pq
import pytest
import yaml

from tests.conftest import REPO
from tests.outputs import token_balance
from tests.runtime.test_ray_start_cluster import _curate, _netns_available

pytestmark = pytest.mark.slow

PORT = 6379  # the namespace has its own ports
IMAGES = REPO / "recipes" / "images.yaml"


def _recipe(tmp, device: str):
    data = yaml.safe_load(IMAGES.read_text())
    for key in ("vocabulary", "image_tokenizer"):
        data[key] = str((IMAGES.parent / data[key]).resolve())
    for src in data["sources"]:
        src["images"] = {**(src.get("images") or {}), "device": device}
    if not (tmp / "images").exists():
        (tmp / "images").symlink_to(REPO / "recipes" / "images")
    path = tmp / f"images-{device}.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


@pytest.fixture(scope="module")
def gpu_cluster(tmp_path_factory):
    if not _netns_available():
        pytest.skip("needs `unshare -n` (a private network namespace) to keep `ray start` nodes on loopback")
    import torch
    if torch.cuda.is_available():
        pytest.skip("simulates GPUs on a CPU machine; on CUDA the codec would run on the device")
    tmp = tmp_path_factory.mktemp("simgpu")
    token = tmp / "token"
    token.write_text(secrets.token_hex(32))
    (tmp / "home").mkdir()
    auto, cuda = _recipe(tmp, "auto"), _recipe(tmp, "cuda")
    nodes = {"RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN_PATH": str(token), "PYTHONPATH": str(REPO)}
    driver = {"HOME": str(tmp / "home"), "PYTHONPATH": str(REPO), "RAY_AUTH_TOKEN_PATH": str(token)}
    address = f"127.0.0.1:{PORT}"
    ray_tmp = tempfile.mkdtemp(prefix="gpu-", dir="/tmp")   # short: Ray's socket paths have a length limit
    plan = {"tmp": str(tmp), "ray_tmp": ray_tmp, "port": PORT, "steps": [
        {"node": "head", "head": True, "cpus": 1, "gpus": 0, "env": nodes},
        {"run": "cuda_without_gpus", "cmd": _curate("run", str(cuda), "--out", str(tmp / "refused"), "--address",
                                                    address), "env": driver, "unset": ["RAY_AUTH_MODE"]},
        {"node": "gpu-node", "cpus": 4, "gpus": 2, "env": nodes},
        {"run": "probe", "cmd": [sys.executable, "-m", "tests.gpuprobe", address, "6", str(tmp / "probe.json")],
         "env": driver, "unset": ["RAY_AUTH_MODE"]},
        {"run": "auto", "cmd": _curate("run", str(auto), "--out", str(tmp / "auto"), "--address", address),
         "env": driver, "unset": ["RAY_AUTH_MODE"]},
    ]}
    (tmp / "plan.json").write_text(json.dumps(plan))
    try:
        p = subprocess.run(["unshare", "-n", sys.executable, "-m", "tests.raystart", str(tmp / "plan.json"),
                            str(tmp / "result.json")], cwd=REPO, capture_output=True, text=True, timeout=1500)
    finally:
        shutil.rmtree(ray_tmp, ignore_errors=True)
    assert p.returncode == 0, p.stderr[-4000:]
    results = json.loads((tmp / "result.json").read_text())
    assert "error" not in results, results["error"]
    return tmp, results


def test_codec_tasks_are_placed_on_gpu_slots_one_task_per_gpu(gpu_cluster):
    tmp, results = gpu_cluster
    assert results["probe"]["rc"] == 0, results["probe"]["stderr"][-4000:]
    probe = json.loads((tmp / "probe.json").read_text())
    assert probe["cluster_gpus"] == 2
    gpu_nodes = {k for k, n in probe["nodes"].items() if n["gpus"] > 0}
    tasks = probe["gpu_tasks"]
    assert len(tasks) == 6 and len(gpu_nodes) == 1
    assert all(t["node"] in gpu_nodes for t in tasks)                    # placed on the GPU node
    assert all(len(t["gpu_ids"]) == 1 and t["visible"] == t["gpu_ids"][0] for t in tasks)   # one GPU each
    assert {t["gpu_ids"][0] for t in tasks} == {"0", "1"}                # both GPUs used
    # never two tasks on one GPU at once, so never more than two at once (the node has 4 CPUs: not the limit)
    for a in tasks:
        for b in tasks:
            if a is not b and b["start"] < a["end"] and a["start"] < b["end"]:
                assert a["gpu_ids"] != b["gpu_ids"], (a, b)
    events = sorted([(t["start"], 1) for t in tasks] + [(t["end"], -1) for t in tasks])
    running = np.cumsum([d for _, d in events])
    assert running.max() <= 2
    # torch sees no CUDA in a simulated GPU slot: the codec runs on the CPU, in float32
    assert {(t["device"], t["precision"]) for t in tasks} == {("cpu", "float32")}
    assert all(t["gpu_ids"] == [] and t["visible"] == "" for t in probe["cpu_tasks"])   # a CPU task holds no GPU


def test_a_pipeline_with_device_auto_records_the_gpu_slot_and_writes_the_local_bytes(gpu_cluster, images_run):
    tmp, results = gpu_cluster
    local = images_run.out   # recipes/images.yaml as shipped (device unset: the CPU), local executor
    assert results["auto"]["rc"] == 0, results["auto"]["stderr"][-4000:]
    assert "over 2 rank(s)" in results["auto"]["stderr"]      # the plan per rank: the cluster's two GPUs
    rows = pq.read_table(tmp / "auto" / "ledger" / "encoders.parquet").to_pylist()
    assert rows and {(r["requested"], r["device"], r["precision"], r["device_name"]) for r in rows} == \
        {("auto", "cpu", "float32", "cpu")}
    assert {r["gpus"] for r in rows} <= {"0", "1"}                    # every codec task held a GPU slot
    for source in ("captioned", "uncaptioned"):
        for ext in ("bin", "idx"):
            assert (tmp / "auto" / "tokenized" / source / f"{source}.{ext}").read_bytes() == \
                (local / "tokenized" / source / f"{source}.{ext}").read_bytes()
    ranks = {r["source"]: r for r in pq.read_table(tmp / "auto" / "ledger" / "rank_plan.parquet").to_pylist()}
    assert ranks["(all)"]["run_ranks"] == 2
    ledger, shards, _ = token_balance(tmp / "auto")   # the ledger balances with every shard
    assert ledger == shards > 0


def test_cuda_on_a_cluster_without_gpus_is_refused_before_any_task(gpu_cluster):
    tmp, results = gpu_cluster
    r = results["cuda_without_gpus"]
    assert r["rc"] == 1, r["stderr"][-4000:]
    assert "asks for a GPU (`device: cuda`) but the Ray cluster has none" in r["stderr"]
    assert "Traceback" not in r["stderr"] and not (tmp / "refused" / "processed").exists()
