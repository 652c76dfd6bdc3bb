"""A Ray cluster of `ray start` nodes in a private network namespace, driven by a JSON plan.

Run as `unshare -n python -m tests.raystart PLAN.json RESULT.json`: inside the namespace the only
interface is loopback, so every Ray process binds 127.0.0.1 and nothing can reach (or be reached
from) the machine's network; ports cannot clash with other Ray instances on the machine. (Outside
such a namespace a `ray start` worker cannot be kept on loopback: with
`RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0` Ray refuses to start worker nodes, and without it Ray replaces
127.0.0.1 in `--address` and `--node-ip-address` by the machine's other address.)

PLAN: {"tmp": DIR, "ray_tmp": DIR, "port": N, "env": {...}, "steps": [STEP, ...]} where a STEP is
`{"node": NAME, "head": bool, "cpus": N, "gpus": N, "env": {...}}` (a `ray start --block` node; waits
until it has joined; `gpus`: `--num-gpus`, GPUs declared to Ray, which need not exist) or `{"run": NAME, "cmd": [...], "env": {...}, "unset": [VAR, ...]}` (a command; its exit
status, stdout and stderr go into RESULT under NAME). Every node is stopped at the end, also when a
step fails; nodes also die with this process (PR_SET_PDEATHSIG), so a killed plan leaves nothing.
"""
from __future__ import annotations

import ctypes
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path


def _ray_tmp(plan: dict) -> str:
    """Ray's session folder. Its sockets' paths must stay under the 107-byte AF_UNIX limit, which a
    pytest temp folder (`/tmp/pytest-of-USER/pytest-N/raystartM/ray/session_<time>_<pid>/sockets/...`)
    can exceed: `ray_tmp` in the plan names a short one."""
    return plan.get("ray_tmp") or plan["tmp"] + "/ray"


def _die_with_parent() -> None:
    ctypes.CDLL(None).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG


def _start_node(step: dict, plan: dict, env: dict, logs: Path) -> subprocess.Popen:
    ray = str(Path(sys.executable).with_name("ray"))
    args = [ray, "start", "--block", "--node-ip-address", "127.0.0.1", "--num-cpus", str(step.get("cpus", 1)),
            "--node-name", step["node"], "--disable-usage-stats"]
    if "gpus" in step:   # declared to Ray; on a CPU machine they are slots only (FIELD-NOTES.md)
        args += ["--num-gpus", str(step["gpus"])]
    if step.get("head"):
        args += ["--head", "--port", str(plan["port"]), "--temp-dir", _ray_tmp(plan),
                 "--include-dashboard", "false"]
    else:
        args += ["--address", f"127.0.0.1:{plan['port']}"]
    log = logs / f"{step['node']}.log"
    proc = subprocess.Popen(args, env={**env, **step.get("env", {})}, stdout=log.open("w"),
                            stderr=subprocess.STDOUT, preexec_fn=_die_with_parent)
    deadline = time.monotonic() + 90
    while "Ray runtime started" not in log.read_text(errors="replace"):
        if proc.poll() is not None or time.monotonic() > deadline:
            raise RuntimeError(f"node {step['node']} did not start:\n{log.read_text(errors='replace')[-3000:]}")
        time.sleep(0.5)
    return proc


def _stop(nodes: list[subprocess.Popen]) -> None:
    for proc in reversed(nodes):       # workers first, the head last
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


def main(plan_path: str, result_path: str) -> int:
    plan = json.loads(Path(plan_path).read_text())
    subprocess.run(["ip", "link", "set", "lo", "up"], check=True)
    logs = Path(plan["tmp"]) / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "1", "RAY_USAGE_STATS_ENABLED": "0",
           "RAY_TMPDIR": _ray_tmp(plan), **plan.get("env", {})}
    env.pop("RAY_ADDRESS", None)
    nodes: list[subprocess.Popen] = []
    results: dict = {}
    try:
        for step in plan["steps"]:
            if "node" in step:
                nodes.append(_start_node(step, plan, env, logs))
                continue
            step_env = {**env, **step.get("env", {})}
            for var in step.get("unset", []):
                step_env.pop(var, None)
            # not from the repository: Ray puts the driver's working directory on every worker's
            # sys.path, which would hide which curate each node has installed
            p = subprocess.run(step["cmd"], env=step_env, capture_output=True, text=True, cwd=plan["tmp"],
                               timeout=step.get("timeout", 600))
            results[step["run"]] = {"rc": p.returncode, "stdout": p.stdout, "stderr": p.stderr}
    except Exception as e:  # noqa: BLE001 - reported to the test, which fails with it
        results["error"] = f"{type(e).__name__}: {e}"
    finally:
        _stop(nodes)
        Path(result_path).write_text(json.dumps(results))
    return 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:]))
