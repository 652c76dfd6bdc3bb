"""A cluster as operators start it: `ray start --head` + `ray start --address` with token authentication
(Ray 2.60), joined by `curate run --address`; the same bytes as the embedded run, auth failures named
as such, and nodes without the recipe's modality plug-in, or with another curate build, named before any
work starts.

The nodes and the curate commands run in a private network namespace (tests/raystart.py): loopback
only, every node on 127.0.0.1, stopped by the plan even when a step fails."""
from __future__ import annotations

import json
import secrets
import shutil
import subprocess
import sys
import tempfile

import pytest

from tests.conftest import REPO, TEXT_DEMO
from tests.outputs import _files, _ledger_rows
from tests.steps.test_modality_plugin import install_toy_modality, toy_recipe

pytestmark = pytest.mark.slow

PORT = 6379  # the namespace has its own ports: Ray's default cannot clash with anything outside


def _netns_available() -> bool:
    try:
        return subprocess.run(["unshare", "-n", "ip", "link", "set", "lo", "up"], capture_output=True,
                              timeout=20).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


def _curate(*args: str) -> list[str]:
    return [sys.executable, "-m", "curation.commands.cli", *args]


@pytest.fixture(scope="module")
def ray_start_cluster(text_run, tmp_path_factory):
    if not _netns_available():
        pytest.skip("needs `unshare -n` (a private network namespace) to keep `ray start` nodes on loopback")
    tmp = tmp_path_factory.mktemp("raystart")
    token = tmp / "token"
    token.write_text(secrets.token_hex(32))
    (tmp / "home").mkdir()               # no ~/.ray/auth_token for the driver: only what a step gives
    stale = tmp / "stale"                # another build of curate for one node
    shutil.copytree(REPO / "curation", stale / "curation", ignore=shutil.ignore_patterns("__pycache__"))
    init = stale / "curation" / "__init__.py"
    init.write_text(init.read_text().replace('__version__ = "', '__version__ = "0.0.9+'))
    nodes = {"RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN_PATH": str(token), "PYTHONPATH": str(REPO)}
    no_token = ["RAY_AUTH_MODE", "RAY_AUTH_TOKEN", "RAY_AUTH_TOKEN_PATH"]
    driver = {"HOME": str(tmp / "home"), "PYTHONPATH": str(REPO)}
    # a recipe of the toy plug-in modality, installed for the driver only (the nodes' PYTHONPATH lacks it)
    plugin = install_toy_modality(tmp / "site")
    toy = toy_recipe(tmp / "toy")
    address = f"127.0.0.1:{PORT}"
    run = lambda out: _curate("run", str(TEXT_DEMO), "--out", str(tmp / out), "--address", address)  # noqa: E731
    ray_tmp = tempfile.mkdtemp(prefix="rs-", dir="/tmp")   # short: Ray's socket paths have a length limit
    plan = {"tmp": str(tmp), "ray_tmp": ray_tmp, "port": PORT, "steps": [
        {"node": "head", "head": True, "env": nodes},
        {"node": "worker-1", "env": nodes},
        {"run": "joined", "cmd": [*run("cluster"), "--workers", "2"],
         "env": {**driver, "RAY_AUTH_TOKEN_PATH": str(token)}, "unset": ["RAY_AUTH_MODE", "RAY_AUTH_TOKEN"]},
        {"run": "wrong_token", "cmd": run("wrong"), "env": {**driver, "RAY_AUTH_TOKEN": "0" * 64},
         "unset": ["RAY_AUTH_MODE", "RAY_AUTH_TOKEN_PATH"]},
        {"run": "no_token", "cmd": run("none"), "env": driver, "unset": no_token},
        {"run": "env_address", "cmd": _curate("run", str(TEXT_DEMO), "--out", str(tmp / "cluster")),
         "env": {**driver, "RAY_AUTH_TOKEN_PATH": str(token), "RAY_ADDRESS": address}, "unset": ["RAY_AUTH_MODE"]},
        {"run": "no_plugin", "cmd": _curate("run", str(toy), "--out", str(tmp / "toy-out"), "--address", address),
         "env": {**driver, "PYTHONPATH": f"{plugin}:{REPO}", "RAY_AUTH_TOKEN_PATH": str(token)},
         "unset": ["RAY_AUTH_MODE"]},
        {"node": "stale-node", "env": {**nodes, "PYTHONPATH": str(stale)}},
        {"run": "stale", "cmd": run("stale-out"), "env": {**driver, "RAY_AUTH_TOKEN_PATH": str(token)},
         "unset": ["RAY_AUTH_MODE"]},
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


def test_ray_start_cluster_run_matches_embedded_run(ray_start_cluster, text_run):
    tmp, results = ray_start_cluster
    r = results["joined"]
    assert r["rc"] == 0, r["stderr"][-4000:]
    assert "cluster: 2 node(s) checked" in r["stderr"]
    out = tmp / "cluster"
    globs = ("tokenized/**/*.bin", "tokenized/**/*.idx", "manifests/*.json", "processed/**/*.parquet",
             "work/minhash/*.parquet")
    a, b = _files(text_run.out, *globs), _files(out, *globs)
    assert a and a.keys() == b.keys() and [k for k in a if a[k] != b[k]] == []
    assert _ledger_rows(text_run.out) == _ledger_rows(out)
    assert not list(out.glob(".nodecheck-*"))           # the node check cleans up after itself


def test_ray_address_from_environment(ray_start_cluster):
    r = ray_start_cluster[1]["env_address"]
    assert r["rc"] == 0, r["stderr"][-4000:]
    assert "cluster: 2 node(s) checked" in r["stderr"] and "already complete" in r["stderr"]


@pytest.mark.parametrize("case,says", [("wrong_token", "the token from RAY_AUTH_TOKEN is not this cluster's"),
                                       ("no_token", "no token was found")])
def test_auth_failure_is_reported_as_auth_failure(ray_start_cluster, case, says):
    r = ray_start_cluster[1][case]
    assert r["rc"] == 1   # a failed command (curation.commands.console)
    err = r["stderr"]
    assert "requires token authentication" in err and says in err
    assert "RAY_AUTH_TOKEN=" in err and "ray get-auth-token" in err
    assert "Traceback" not in err and "check that `ray start --head` runs there" not in err


def test_node_with_another_curate_build_is_named(ray_start_cluster):
    tmp, results = ray_start_cluster
    r = results["stale"]
    assert r["rc"] == 1   # a failed command (curation.commands.console)
    err = r["stderr"]
    assert "node stale-node" in err and "curate 0.0.9+0.1.0" in err and "install the same build" in err
    assert "node head" not in err and "node worker-1" not in err
    assert not (tmp / "stale-out" / "tokenized").exists()   # refused before any work


def test_nodes_without_the_recipes_modality_plugin_are_named(ray_start_cluster):
    """The plug-in is on the driver's path only: every node would fail its steps mid-run (or, with another
    build, write other bytes), so the node check names each before any work."""
    tmp, results = ray_start_cluster
    r = results["no_plugin"]
    assert r["rc"] == 1, r["stderr"][-3000:]
    err = r["stderr"]
    says = "modality 'video-frames' is not installed there (the driver has the plug-in video-frames 0.1 (code "
    assert "2 problem(s) on the cluster's nodes" in err and err.count(says) == 2, err[-3000:]
    assert "node head" in err and "node worker-1" in err and "install that plug-in on every node" in err
    assert not (tmp / "toy-out" / "tokenized").exists()   # refused before any work
