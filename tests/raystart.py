"""A Ray cluster of `ray start` nodes in a private network namespace, driven by a JSON plan.

Run as `unshare -n python -m tests.raystart PLAN.json RESULT.json`: inside the namespace the only
interface is loopback, so every Ray process binds 127.0.0.1 and nothing can reach (or be reached
from) the machine's network; ports cannot clash with other Ray instances on the machine. (Outside
such a namespace a `ray start` worker cannot be kept on loopback: with
`RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0` Ray refuses to start worker nodes, and without it Ray replaces
127.0.0.1 in `--address` and `--node-ip-address` by the machine's other address.)

PLAN: {"tmp": DIR, "ray_tmp": DIR, "port": N, "env": {...}, "steps": [STEP, ...]} where a STEP is
`{"node": NAME, "head": bool, "cpus": N, "gpus": N, "env": {...}}` (a `ray start --block` node; `gpus`:
`--num-gpus`, GPUs declared to Ray, which need not exist; waits until it has joined, or with `"background": true` does not wait) or `{"run": NAME, "cmd": [...], "env": {...}, "unset": [VAR, ...]}` (a command; its exit
status, stdout, stderr and wall seconds go into RESULT under NAME). For fault runs: `"background": true`
on a run starts it without waiting; `{"wait": NAME}` waits for it; `{"kill": NODE, "when": PREFIX}` waits
until a Ray task whose name starts with PREFIX runs on NODE (its worker's process title is
`ray::<name>`, the executor names tasks by node key; `"run_of": NAME` times it against that run and gives
up when it ends), then SIGKILLs that node's raylet and, as a lost
machine would take them, the rest of its processes (what was killed, and when, goes into RESULT under
`kill-NODE`). `"kill": [NODE, ...]` kills the first of those nodes still alive on which such a task runs. Every node is stopped at the end, also when a step fails; nodes also die with this process
(PR_SET_PDEATHSIG), so a killed plan leaves nothing.
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
    if step.get("background"):   # joins while the next steps go on (a node added to a running cluster)
        return proc
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


def _running(root, prefix: str) -> tuple[list, str | None, object, object]:
    """(the node's processes, the name of a running task `ray::<prefix>...` or None, its worker process, its
    raylet or None)."""
    import psutil

    tree = root.children(recursive=True)
    task = worker = raylet = None
    for p in tree:
        try:
            cmd = " ".join(p.cmdline())
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            continue
        if cmd.startswith(f"ray::{prefix}"):
            task, worker = cmd.strip(), p   # Ray pads the process title with spaces
        if p.name() == "raylet" or "/raylet/raylet" in cmd:
            raylet = p
    return tree, task, worker, raylet


def _still_running(worker, task: str) -> bool:
    """Stop the worker, then read its title again: a task read as running may have ended (and its worker taken the
    next) in the moment since, and a kill would then lose another task than the one recorded. Stopped, it cannot
    finish; if its title changed it is let go again."""
    import psutil

    try:
        worker.suspend()
        if " ".join(worker.cmdline()).strip() == task:
            return True
        worker.resume()
    except psutil.NoSuchProcess:
        pass
    return False


def _kill_when(nodes: dict[str, subprocess.Popen], step: dict, run: tuple | None) -> tuple[str, dict]:
    """SIGKILL the raylet of the first of `nodes` on which a task named `step["when"]...` runs; then that
    node's other processes. `run`: the background run (process, start time) the kill is timed against.
    Returns (the node's name, what was killed and when)."""
    import psutil

    started = run[1] if run else time.monotonic()
    deadline = time.monotonic() + step.get("timeout", 600)
    roots = {name: psutil.Process(proc.pid) for name, proc in nodes.items()}
    while True:
        found = [(name, *_running(root, step["when"])) for name, root in roots.items()]
        hit = next(((name, tree, task, raylet) for name, tree, task, worker, raylet in found
                    if task and raylet and _still_running(worker, task)), None)
        if hit:
            break
        if time.monotonic() > deadline or (run and run[0].poll() is not None):
            raise RuntimeError(f"no task {step['when']}* ran on node(s) {', '.join(nodes)} before the run ended "
                               f"or {step.get('timeout', 600)} s passed")
        time.sleep(0.02)
    name, tree, task, raylet = hit
    raylet.kill()
    at = time.monotonic() - started
    for p in tree:   # the node's workers and agents: gone with the machine
        try:
            p.kill()
        except psutil.NoSuchProcess:
            pass
    return name, {"task": task, "seconds": round(at, 2), "processes": len(tree)}


def main(plan_path: str, result_path: str) -> int:
    plan = json.loads(Path(plan_path).read_text())
    subprocess.run(["ip", "link", "set", "lo", "up"], check=True)
    logs = Path(plan["tmp"]) / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "1", "RAY_USAGE_STATS_ENABLED": "0",
           "RAY_TMPDIR": _ray_tmp(plan), **plan.get("env", {})}
    env.pop("RAY_ADDRESS", None)
    nodes: list[subprocess.Popen] = []
    named: dict[str, subprocess.Popen] = {}
    background: dict[str, tuple[subprocess.Popen, float, dict]] = {}
    results: dict = {}
    killed: set[str] = set()
    try:
        for step in plan["steps"]:
            if "node" in step and "kill" not in step:
                nodes.append(_start_node(step, plan, env, logs))
                named[step["node"]] = nodes[-1]
                continue
            if "kill" in step:
                wanted = [step["kill"]] if isinstance(step["kill"], str) else step["kill"]
                alive = {n: named[n] for n in wanted if n not in killed}
                name, results[f"kill-{name}"] = _kill_when(alive, step, background[step["run_of"]][:2]
                                                           if "run_of" in step else None)
                killed.add(name)
                continue
            if "wait" in step:
                proc, t0, opts = background.pop(step["wait"])
                proc.wait(timeout=opts.get("timeout", 1200))
                results[step["wait"]] = {"rc": proc.returncode, "seconds": round(time.monotonic() - t0, 2),
                                         **{k: (logs / f"{step['wait']}.{k}").read_text(errors="replace")
                                            for k in ("stdout", "stderr")}}
                continue
            step_env = {**env, **step.get("env", {})}
            for var in step.get("unset", []):
                step_env.pop(var, None)
            # not from the repository: Ray puts the driver's working directory on every worker's
            # sys.path, which would hide which curate each node has installed
            t0 = time.monotonic()
            if step.get("background"):
                # to files, not pipes: nobody reads a pipe while the run goes
                background[step["run"]] = (subprocess.Popen(
                    step["cmd"], env=step_env, stdout=(logs / f"{step['run']}.stdout").open("w"),
                    stderr=(logs / f"{step['run']}.stderr").open("w"), cwd=plan["tmp"]), t0, step)
                continue
            p = subprocess.run(step["cmd"], env=step_env, capture_output=True, text=True, cwd=plan["tmp"],
                               timeout=step.get("timeout", 600))
            results[step["run"]] = {"rc": p.returncode, "stdout": p.stdout, "stderr": p.stderr,
                                    "seconds": round(time.monotonic() - t0, 2)}
    except Exception as e:  # noqa: BLE001 - reported to the test, which fails with it
        results["error"] = f"{type(e).__name__}: {e}"
    finally:
        for proc, _, _ in background.values():   # a step failed while a run was going: stop it
            proc.kill()
            proc.wait()
        _stop(nodes)
        Path(result_path).write_text(json.dumps(results))
    return 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:]))


def fault_steps(run: str, cmd: list[str], env: dict, unset: list[str], node_env: dict, join: str = "worker-3") -> list[dict]:
    """Steps of a run on a head and nodes `worker-1`, `worker-2` that loses the first of the two on which a
    signatures task runs, gains node `join` right after, and loses another worker (the other one, or `join`)
    while a tokenize task runs there; the run must finish on what is left (tests and
    tests/benchmarks/bench_cluster.py). RESULT has two `kill-NODE` entries, each naming the task that ran there.

    Either worker may go first: Ray's default (hybrid) policy fills the head and then breaks ties between
    equally idle nodes the same way every time, so on a quiet machine one worker could run no signatures
    task at all (CI skipped the fault tests for that, twice per run). The joined node has 2 CPUs and the
    second kill waits until it is up: a late 1-CPU node once ran none of a quick run's remaining tasks
    (head 61, worker-1 4, worker-2 51, worker-3 0); half busy, a 2-CPU node is the least used. For the same
    reason the second kill takes whichever of the live workers runs a tokenize task first, the joined node
    included: the text demo has few tokenize tasks, and on an idle machine the head and the 2-CPU node
    sometimes ran all of them (the tests were skipped on 12-06)."""
    workers = ["worker-1", "worker-2"]
    return [{"run": run, "cmd": cmd, "env": env, "unset": unset, "background": True, "timeout": 1500},
            {"kill": workers, "when": "signatures/", "run_of": run},
            {"node": join, "cpus": 2, "env": node_env},
            {"kill": [*workers, join], "when": "tokenize/", "run_of": run},
            {"wait": run}]


# Ray notices a dead raylet by failed health checks: 1 s apart, 3 misses (default 3 s, 5 misses)
FAST_HEALTH_CHECKS = {"RAY_health_check_initial_delay_ms": "1000", "RAY_health_check_period_ms": "1000",
                      "RAY_health_check_timeout_ms": "1000", "RAY_health_check_failure_threshold": "3"}
