"""The Ray executor: an embedded local instance on loopback by default, or a cluster given by address.

The embedded instance binds every Ray process to 127.0.0.1 with the dashboard off: Ray's
ports have no authentication, so an embedded run must never listen on a public interface
(docs/FIELD-NOTES.md, Ray). `--workers N` sets its CPUs; on a cluster it caps the tasks in flight. Tasks are
`curation.runtime.node.run_node` calls; the results are byte-identical to the local executor's.
"""
from __future__ import annotations

import os
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from curation.core.resources import ray_options
from curation.errors import CurateError
from curation.runtime import cluster
from curation.runtime.progress import Bar


def _loopback_env() -> None:
    os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")  # nodes use the loopback address
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")            # no phoning home
    os.environ.setdefault("RAY_DEDUP_LOGS", "0")


class RayExecutor:
    name = "ray"

    def __init__(self, workers: int | None = None, address: str | None = None, progress: bool = True,
                 out: Path | None = None, inputs: Sequence[Path] = (), media: set[str] | None = None):
        """`out`, `inputs`: on a cluster, every node must see them at these paths (checked on entry), and
        have the driver's versions of the libraries that the recipe's `media` use (`cluster.media_kinds`)."""
        self.workers = workers
        self.address = address or os.environ.get("RAY_ADDRESS") or None
        self.progress = progress
        self.out, self.inputs, self.media = out, inputs, media
        self._started = False

    def __enter__(self) -> "RayExecutor":
        os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
        if not self.address:
            _loopback_env()   # before Ray reads it; only embedded: a cluster driver must not hide on loopback
        import ray
        self.ray = ray
        if ray.is_initialized():
            self._started = False
        elif self.address:
            cluster.connect(self.address)   # token auth; errors name the cause
            self._started = True
            if self.out is not None:
                try:
                    nodes = cluster.check_nodes(self.out, self.inputs, media=self.media)
                except BaseException:
                    ray.shutdown()
                    raise
                if self.progress:
                    print(f"cluster: {len(nodes)} node(s) checked: curate, libraries, {self.out} and "
                          f"{len(self.inputs)} input(s)", file=sys.stderr)
        else:
            ray.init(num_cpus=self.workers or os.cpu_count(), include_dashboard=False,
                     _node_ip_address="127.0.0.1", logging_level="ERROR", log_to_driver=False,
                     configure_logging=True)
            self._started = True
        self.slots = self.workers or int(ray.cluster_resources().get("CPU", 1))
        self.gpus = float(ray.cluster_resources().get("GPU", 0))
        return self

    def __exit__(self, *exc) -> None:
        if self._started:
            self.ray.shutdown()

    def check_resources(self, resources: dict[str, dict]) -> None:
        """Every node's request can be met by this cluster (`ray_options` refuses a GPU on a cluster without)."""
        for key, r in resources.items():
            ray_options(r, self.gpus, key)

    def map(self, fn: Callable, calls: Sequence[tuple[str, tuple]], label: str,
            resources: dict[str, dict] | None = None) -> dict[str, Any]:
        """Run `fn(*args)` for each (key, args) as Ray tasks, at most `slots` in flight, each asking for its
        key's `resources` (`curation.core.resources.ray_options`: one CPU, or one whole GPU per codec task)."""
        ray = self.ray
        resources = resources or {}
        remote = ray.remote(num_cpus=1, max_retries=0)(fn)
        pending: dict[Any, str] = {}
        results: dict[str, Any] = {}
        queue = list(calls)
        bar = Bar(label, len(queue), self.progress)
        try:
            while queue or pending:
                while queue and len(pending) < self.slots:
                    key, args = queue.pop(0)
                    pending[remote.options(**ray_options(resources.get(key), self.gpus, key)).remote(*args)] = key
                done, _ = ray.wait(list(pending), num_returns=1)
                for ref in done:
                    key = pending.pop(ref)
                    try:
                        results[key] = ray.get(ref)
                    except ray.exceptions.RayTaskError as e:
                        cause = getattr(e, "cause", None)
                        for ref2 in pending:
                            ray.cancel(ref2)
                        if isinstance(cause, CurateError):
                            raise cause from None
                        raise CurateError(f"task {key} failed: {cause!r}\n{e}") from None
                    bar.advance(key)
        finally:
            bar.close()
        return results
