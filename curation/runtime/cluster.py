"""Joining a Ray cluster that an operator started (`ray start`), and checking its nodes before any work.

Token authentication (Ray >= 2.52; a head started by `ray start --head` enables it when it finds a
token, and `ray.init()` of Ray 2.60 creates `~/.ray/auth_token` for every local cluster):
- A client sends the token only when `RAY_AUTH_MODE=token` is set. Ray sets it on its own for a
  local cluster it finds itself, never for an explicit address (`--address`, `RAY_ADDRESS`), so a
  plain `ray.init(address=...)` is refused with `InvalidAuthToken` and retries for 20 s. `connect`
  sets `RAY_AUTH_MODE=token` when a token is available and the variable is unset.
- The token, in Ray's order: `RAY_AUTH_TOKEN` (the value), `RAY_AUTH_TOKEN_PATH` (a file; Ray
  aborts the process when it cannot read it, so it is checked here first), `~/.ray/auth_token`
  (written by `ray get-auth-token --generate`; `ray get-auth-token` on the head prints it).
`connect` probes the head's GCS first (one RPC), so a refused token or a wrong address is reported
as such, in a second, before `ray.init` retries.

Every node runs curate's tasks from its own installation and reads and writes the output folder
and the inputs at the driver's paths. `check_nodes` runs one probe task pinned to each node with
CPUs and compares, with the driver's:
- what the node runs (`curation.runtime.build.environment`): curate's version and code digest, Python,
  the libraries that decide this recipe's outputs (`deciding_libraries`: a text-only recipe does not
  compare torch or lhotse) and the build of every modality plug-in the recipe uses (`plugin_modalities`);
- the output folder: the same folder (a file the driver writes must be visible there, and the node must
  be able to write one the driver then sees);
- every input file: present, same size.
"""
from __future__ import annotations

import os
import secrets
import shutil
import socket
import sys
from collections.abc import Iterable
from pathlib import Path

from curation.errors import CurateError
from curation.runtime.build import DECIDING, deciding_libraries, environment

_DEFAULT_TOKEN = Path("~/.ray/auth_token")


def token_source() -> str | None:
    """Where Ray will take the cluster token from, in Ray's own order; None when there is none."""
    if os.environ.get("RAY_AUTH_TOKEN", "").strip():
        return "RAY_AUTH_TOKEN"
    path = os.environ.get("RAY_AUTH_TOKEN_PATH")
    if path:
        p = Path(path).expanduser()
        try:
            if not p.read_text().strip():
                raise CurateError(f"RAY_AUTH_TOKEN_PATH={path} is empty; put the cluster's token there "
                                  f"(`ray get-auth-token` on the head prints it) or unset the variable")
        except OSError as e:
            raise CurateError(f"RAY_AUTH_TOKEN_PATH={path} cannot be read ({e.strerror}); point it at a "
                              f"file holding the cluster's token or unset it") from None
        return f"RAY_AUTH_TOKEN_PATH={path}"
    default = _DEFAULT_TOKEN.expanduser()
    return str(_DEFAULT_TOKEN) if default.is_file() and default.read_text().strip() else None


def _refresh_ray_auth() -> None:
    """Ray caches the auth mode and the token in C++; reload both after changing the environment."""
    try:
        from ray._raylet import AuthenticationTokenLoader, Config
    except ImportError:  # another Ray layout: ray.init reads the environment itself
        return
    Config.initialize("")
    AuthenticationTokenLoader.instance().reset_cache()


def prepare_auth() -> str | None:
    """Set `RAY_AUTH_MODE=token` when a token is available and the mode is unset; return the source."""
    source = token_source()
    if source and "RAY_AUTH_MODE" not in os.environ:
        os.environ["RAY_AUTH_MODE"] = "token"
    _refresh_ray_auth()
    return source


def auth_help(address: str, source: str | None) -> str:
    mode = os.environ.get("RAY_AUTH_MODE")
    if mode and mode.lower() != "token":
        what = f"RAY_AUTH_MODE={mode} is set, so no token was sent; unset it or set RAY_AUTH_MODE=token"
    elif source:
        what = f"the token from {source} is not this cluster's"
    else:
        what = "no token was found (RAY_AUTH_TOKEN, RAY_AUTH_TOKEN_PATH, ~/.ray/auth_token)"
    return (f"the Ray cluster at {address} requires token authentication and refused curate: {what}. "
            f"Give the cluster's token (on the head: `ray get-auth-token`) as RAY_AUTH_TOKEN=<token>, or "
            f"RAY_AUTH_TOKEN_PATH=<file>, or copy it to ~/.ray/auth_token; curate sets RAY_AUTH_MODE=token "
            f"when it finds one")


def _split(address: str) -> tuple[str, int] | None:
    """host and port of a plain `host:port` address; None for `auto`, `local`, `ray://...`."""
    if "://" in address or address in ("auto", "local"):
        return None
    host, sep, port = address.rpartition(":")
    if not sep or not port.isdigit():
        raise CurateError(f"Ray address {address!r} is not host:port (the head's GCS port, 6379 unless "
                          f"`ray start --head --port` said otherwise)")
    return host.strip("[]"), int(port)


def probe(address: str, source: str | None, timeout: float = 5.0) -> None:
    """One TCP connect and one GCS call: a closed port and a refused token fail here, by name."""
    hp = _split(address)
    if hp is None:
        return
    try:
        socket.create_connection(hp, timeout=timeout).close()
    except OSError as e:
        raise CurateError(f"nothing answers at the Ray address {address} ({e.strerror or e}); start the head "
                          f"there (`ray start --head --port {hp[1]}`) or fix --address / RAY_ADDRESS") from None
    try:
        from ray._raylet import GcsClient
        from ray.exceptions import AuthenticationError
    except ImportError:
        return
    try:
        GcsClient(address=address).cluster_id  # noqa: B018 - the call that authenticates
    except AuthenticationError:
        raise CurateError(auth_help(address, source)) from None
    except Exception as e:  # noqa: BLE001 - anything else: ray.init below reports it in its own words
        if "auth" in str(e).lower():
            raise CurateError(auth_help(address, source)) from None


def connect(address: str) -> None:
    """`ray.init` on the cluster at `address` with its token; errors name the cause and the fix."""
    import ray
    from ray.exceptions import AuthenticationError

    source = prepare_auth()
    probe(address, source)
    loopback = address.startswith(("127.", "localhost"))
    try:
        ray.init(address=address, logging_level="ERROR", log_to_driver=False,
                 _node_ip_address="127.0.0.1" if loopback else None)
    except AuthenticationError:
        raise CurateError(auth_help(address, source)) from None
    except (ConnectionError, RuntimeError, ValueError) as e:
        raise CurateError(f"cannot join the Ray cluster at {address}: {e}; check that `ray start --head` "
                          f"runs there, that this machine reaches its GCS port, and that Ray here is the "
                          f"cluster's version ({ray.__version__} here)") from None




def node_probe(check_dir: str, nonce: str, node_id: str, inputs: dict[str, int]) -> dict:
    """Runs on a node (shipped by value: it must work where curate is missing or another version)."""
    import os
    import socket
    report = {"host": socket.gethostname(), "env": None, "error": None, "out": "ok", "inputs": []}
    try:
        from curation.runtime.build import environment
        report["env"] = environment()
    except Exception as e:  # noqa: BLE001 - reported to the driver, which fails the run
        report["error"] = f"{type(e).__name__}: {e}"
    marker = os.path.join(check_dir, "driver")
    if not check_dir:   # an output URL: every task stages locally and publishes, nothing is shared
        pass
    elif not os.path.isdir(os.path.dirname(check_dir)):
        report["out"] = "missing"
    else:
        try:
            with open(marker) as f:
                seen = f.read()
        except OSError:
            seen = None
        if seen != nonce:
            report["out"] = "other"
        else:
            try:
                with open(os.path.join(check_dir, node_id), "w") as f:
                    f.write(nonce)
            except OSError as e:
                report["out"] = f"readonly: {e.strerror}"
    for path, size in inputs.items():
        try:
            got = os.stat(path).st_size
        except OSError:
            report["inputs"].append((path, None, size))
            continue
        if got != size:
            report["inputs"].append((path, got, size))
    return report


def problems(report: dict, driver: dict, out: Path, libraries: Iterable[str] = DECIDING,
             modalities: Iterable[str] = ()) -> list[str]:
    """What is wrong with one node's report, as sentences; empty when the node is fit. Only `libraries`
    (`deciding_libraries` of the recipe's media) and the plug-ins of `modalities` (`plugin_modalities`) are
    compared: a node reports all it has."""
    bad = []
    env = report.get("env")
    if env is None:
        bad.append(f"curate cannot be imported ({report.get('error')}); install curate=={driver['curate']} "
                   f"(and its extras) on every node")
    else:
        if env["curate"] != driver["curate"] or env["code"] != driver["code"]:
            bad.append(f"curate {env['curate']} (code {env['code']}) while the driver runs {driver['curate']} "
                       f"(code {driver['code']}); install the same build on every node")
        if env["python"] != driver["python"]:
            bad.append(f"Python {env['python']}, the driver {driver['python']}")
        libs = [f"{d} {env['libs'].get(d) or 'absent'} (driver {driver['libs'].get(d) or 'absent'})"
                for d in sorted(libraries) if env["libs"].get(d) != driver["libs"].get(d)]
        if libs:
            bad.append("other library versions: " + ", ".join(libs))
        for name in sorted(modalities):
            want, got = driver.get("plugins", {}).get(name), (env.get("plugins") or {}).get(name)
            if got is None:
                bad.append(f"modality {name!r} is not installed there (the driver has the plug-in {want}); "
                           f"install that plug-in on every node")
            elif got != want:
                bad.append(f"modality {name!r}: the plug-in {got} there, the driver's {want}; install the same "
                           f"build on every node")
    if report["out"] == "missing":
        bad.append(f"the output folder {out} does not exist there; it must be one shared folder at the same "
                   f"path on every node")
    elif report["out"] == "other":
        bad.append(f"{out} there is not the driver's folder (a file the driver wrote in it is not visible); "
                   f"mount the same shared storage at the same path on every node")
    elif report["out"] != "ok":
        bad.append(f"cannot write into {out} ({report['out'].split(': ', 1)[-1]})")
    missing = [p for p, got, _ in report["inputs"] if got is None]
    differ = [f"{p} ({got} bytes, the driver's {want})" for p, got, want in report["inputs"] if got is not None]
    for label, items in (("inputs missing", missing), ("inputs of another size", differ)):
        if items:
            more = f" and {len(items) - 3} more" if len(items) > 3 else ""
            bad.append(f"{label}: {', '.join(items[:3])}{more}")
    return bad


def check_nodes(out: Path, inputs: Iterable[Path], timeout: float = 180.0,
                media: Iterable[str] | None = None, modalities: Iterable[str] = ()) -> list[dict]:
    """Probe every alive node with CPUs; raise CurateError naming each unfit node and why. `media`: the
    recipe's (`media_kinds`), which decide the libraries compared; None compares every deciding one.
    `modalities`: the recipe's plug-in modalities (`plugin_modalities`), whose builds are compared."""
    import ray
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    from curation.core.outloc import is_remote
    shared = not is_remote(out)   # an output URL needs no shared folder (`curation.runtime.publish`)
    out = Path(out).resolve() if shared else out
    sizes = {str(Path(p).resolve()): Path(p).stat().st_size for p in inputs}
    nonce = secrets.token_hex(8)
    check_dir = out / f".nodecheck-{nonce}" if shared else ""
    if shared:
        check_dir.mkdir(parents=True)
        (check_dir / "driver").write_text(nonce)
    try:
        ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])
        fn = ray.remote(num_cpus=0, max_retries=0)(node_probe)
        nodes = [n for n in ray.nodes() if n.get("Alive") and n.get("Resources", {}).get("CPU", 0) > 0]
        if not nodes:
            raise CurateError("the Ray cluster has no alive node with CPUs; start workers with `ray start "
                              "--address HEAD:PORT` (or give the head CPUs)")
        refs = {fn.options(scheduling_strategy=NodeAffinitySchedulingStrategy(n["NodeID"], soft=False))
                .remote(str(check_dir), nonce, n["NodeID"], sizes): n for n in nodes}
        done, late = ray.wait(list(refs), num_returns=len(refs), timeout=timeout)
        driver = environment()
        failures = []
        for ref in refs:
            n = refs[ref]
            name = f"node {n.get('NodeName') or n['NodeManagerAddress']} (id {n['NodeID'][:12]}"
            if ref in late:
                failures.append(f"{name}): no answer within {timeout:.0f} s; its workers may not start")
                continue
            try:
                report = ray.get(ref)
            except Exception as e:  # noqa: BLE001 - a node whose worker dies is unfit
                failures.append(f"{name}): the check task failed: {e}")
                continue
            bad = problems(report, driver, out, deciding_libraries(media), modalities)
            if shared and report["out"] == "ok" and not (check_dir / n["NodeID"]).is_file():
                bad.append(f"a file it wrote into {out} is not visible to the driver; {out} must be shared")
            failures += [f"{name}, host {report['host']}): {b}" for b in bad]
        if failures:
            raise CurateError(f"{len(failures)} problem(s) on the cluster's nodes:\n  " + "\n  ".join(failures))
        return [refs[r] for r in refs]
    finally:
        ray.cloudpickle.unregister_pickle_by_value(sys.modules[__name__])
        if shared:
            shutil.rmtree(check_dir, ignore_errors=True)
