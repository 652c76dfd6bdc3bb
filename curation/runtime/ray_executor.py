"""The Ray executor: an embedded local instance on loopback by default, or a cluster given by address.

The embedded instance binds every Ray process to 127.0.0.1 with the dashboard off: Ray's
ports have no authentication, so an embedded run must never listen on a public interface
(docs/FIELD-NOTES.md, Ray). `--workers N` sets its CPUs; on a cluster it caps the tasks in flight. Tasks are
`curation.runtime.node.run_node` calls, scheduled by `curation.runtime.schedule`; the results are
byte-identical to the local executor's. A task lost with its worker or node is resubmitted here (not by
Ray's `max_retries`), so that each loss is recorded for the ledger's `task_retries`.

A node's long lists (`SHIP_ONCE`: a partitioned task's shards and deps, which its sibling tasks share) go
into Ray's object store once and travel as references: at 200,000 shards a MinHash band task's node pickles
to 8.2 MB in 165 ms, and a run submits bands × partitions of them.
"""
from __future__ import annotations

import dataclasses
import os
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from curation.core.node import Node
from curation.core.resources import ray_options
from curation.errors import CurateError
from curation.runtime import cluster
from curation.runtime.fanout import spreading
from curation.runtime.schedule import run_all

# a list in a node at least this long (0.2 MB pickled) goes to the object store once and travels by reference;
# shorter ones, such as a clustering round's deps (one per partition, at most 1,025, a list per node), are sent
# inline: stored, each would stay pinned in the object store until the run ends
SHIP_ONCE = 10_000


class _Stored:
    """A node's list, put in Ray's object store once for every task that names it (`RayExecutor._slim`)."""
    __slots__ = ("ref",)

    def __init__(self, ref):
        self.ref = ref


def _full(arg):
    """A task's argument with its stored lists fetched back (on the worker)."""
    if not isinstance(arg, Node) or not (isinstance(arg.deps, _Stored) or
                                         any(isinstance(v, _Stored) for v in arg.spec.values())):
        return arg
    import ray
    get = lambda v: ray.get(v.ref) if isinstance(v, _Stored) else v  # noqa: E731
    return dataclasses.replace(arg, deps=get(arg.deps), spec={k: get(v) for k, v in arg.spec.items()})


# Lost with their worker or node (killed, preempted, out of memory): the task itself did nothing wrong,
# so it runs again elsewhere. An exception the task raised (RayTaskError) is never retried.
DEFAULT_RETRIES = 3
# A worker process runs at most this many tasks, then Ray starts a fresh one (`max_calls`). Workers are reused
# across phases, so without it a worker's memory is the union of everything it ever ran and cached (spaCy's
# strings, the tokenizer, allocator pages kept from earlier tasks), and grows with the number of tasks, that
# is, with the corpus: the largest worker measured 336 MB at 100k documents and 420 MB at 1M (1.25x;
# reports/benchmarks/scale.md). A fresh worker costs its start and its first task's model loads (about 2 s).
WORKER_TASKS = 100


def _system_failures() -> tuple[type[BaseException], ...]:
    from ray import exceptions as x
    return (x.WorkerCrashedError, x.NodeDiedError, x.ObjectLostError, x.OutOfMemoryError)


def _loopback_env() -> None:
    os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")  # nodes use the loopback address
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")            # no phoning home
    os.environ.setdefault("RAY_DEDUP_LOGS", "0")


class RayExecutor:
    name = "ray"

    def __init__(self, workers: int | None = None, address: str | None = None, progress: bool = True,
                 out: Path | None = None, inputs: Sequence[Path] = (), media: set[str] | None = None,
                 retries: int = DEFAULT_RETRIES, modalities: set[str] | frozenset[str] = frozenset()):
        """`out`, `inputs`: on a cluster, every node must see them at these paths (checked on entry), and
        have the driver's versions of the libraries that the recipe's `media` use (`build.media_kinds`) and
        of the plug-ins of its `modalities` (`build.plugin_modalities`)."""
        self.workers = workers
        self.address = address or os.environ.get("RAY_ADDRESS") or None
        self.progress = progress
        self.out, self.inputs, self.media, self.modalities = out, inputs, media, modalities
        self._started = False
        self.max_retries = retries
        self.retries: list[dict] = []          # one row per resubmission (the ledger's `task_retries`)
        self.tasks_per_node: dict[str, int] = {}
        self._pending: dict[Any, tuple] = {}
        self._cpus, self._cpus_at = 1, float("-inf")
        self._stored: dict[int, tuple[list, _Stored]] = {}   # id of a shared list -> (the list, its reference)

    def __enter__(self) -> RayExecutor:
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
                    nodes = cluster.check_nodes(self.out, self.inputs, media=self.media,
                                                modalities=self.modalities)
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
        # max_retries=0: this executor retries lost tasks itself, so that each retry is recorded
        self._remote = ray.remote(num_cpus=1, max_retries=0, max_calls=WORKER_TASKS)(_on_node)
        self._system = _system_failures()
        self.gpus = float(ray.cluster_resources().get("GPU", 0))   # GPU tasks ask for one each (`ray_options`)
        return self

    def __exit__(self, *exc) -> None:
        if self.address and self.progress and self.tasks_per_node:
            counts = self.node_counts()
            print(f"cluster: tasks per node: {', '.join(f'{k} {v}' for k, v in counts.items())}", file=sys.stderr)
        if self._started:
            self.ray.shutdown()

    @property
    def slots(self) -> int:
        """Tasks in flight at most: `--workers`, else the cluster's CPUs now (re-read every few seconds, so a
        node that joins mid-run gets work and a lost one stops being counted)."""
        if self.workers:
            return self.workers
        now = time.monotonic()
        if now - self._cpus_at > 2.0:
            self._cpus_at = now
            self._cpus = max(1, int(self.ray.cluster_resources().get("CPU", 1)))
        return self._cpus

    def check_resources(self, resources: dict[str, dict]) -> None:
        """Every node's request can be met by this cluster (`ray_options` refuses a GPU on a cluster without)."""
        for key, r in resources.items():
            ray_options(r, self.gpus, key)

    def submit(self, key: str, fn: Callable, args: tuple, resources: dict | None = None) -> None:
        """Run `fn(*args)` as a Ray task asking for `resources` (`curation.core.resources.ray_options`: one CPU,
        or one whole GPU per codec task); named by the node key: `ray::tokenize/web/00001` in `ps`, the
        dashboard and the task's traceback."""
        self._pending[self._launch(key, fn, args, resources)] = (key, fn, args, resources, 0)

    def _launch(self, key: str, fn: Callable, args: tuple, resources: dict | None):
        args = tuple(self._slim(a) if isinstance(a, Node) else a for a in args)
        return self._remote.options(name=key, **ray_options(resources, self.gpus, key)).remote(fn, *args)

    def _slim(self, node: Node) -> Node:
        """The node with its lists of `SHIP_ONCE` or more entries replaced by references to the object store,
        one put per list object (sibling nodes share theirs: `curation.plan` builds one list for them all)."""
        big = lambda v: isinstance(v, list) and len(v) >= SHIP_ONCE  # noqa: E731
        if not big(node.deps) and not any(big(v) for v in node.spec.values()):
            return node
        return dataclasses.replace(node, deps=self._store(node.deps) if big(node.deps) else node.deps,
                                   spec={k: self._store(v) if big(v) else v for k, v in node.spec.items()})

    def _store(self, value: list) -> _Stored:
        held = self._stored.get(id(value))
        if held is None or held[0] is not value:   # the list is kept here, so its id is never reused meanwhile
            held = self._stored[id(value)] = (value, _Stored(self.ray.put(value)))
        return held[1]

    def wait(self) -> list[tuple[str, Any]]:
        """The tasks that finished (possibly none: a task lost with its worker or node is resubmitted)."""
        ray = self.ray
        done, _ = ray.wait(list(self._pending), num_returns=1)
        results = []
        for ref in done:
            key, fn, args, resources, attempt = self._pending.pop(ref)
            try:
                node_id, result = ray.get(ref)
            except self._system as e:
                self._retry(key, fn, args, resources, attempt, e)
                continue
            except ray.exceptions.RayTaskError as e:
                cause = getattr(e, "cause", None)
                if isinstance(cause, CurateError):   # our own data or recipe error: its reason, as raised
                    raise cause from None
                # the task's own exception is the cause (an OSError there becomes an operator-fault sentence,
                # curation.commands.console); the message keeps Ray's remote traceback
                raise CurateError(f"task {key} failed: {cause!r}\n{e}") from (cause or e)
            self.tasks_per_node[node_id] = self.tasks_per_node.get(node_id, 0) + 1
            results.append((key, result))
        return results

    def _retry(self, key: str, fn: Callable, args: tuple, resources: dict | None, attempt: int,
               e: BaseException) -> None:
        """Resubmit a task whose worker or node died, and record it; past `retries` attempts, fail the run."""
        message = (str(e).strip().splitlines() or [""])[0][:500]
        if attempt >= self.max_retries:
            raise CurateError(f"task {key} failed {attempt + 1} time(s) because its worker or node died (last: "
                              f"{type(e).__name__}: {message}); the cluster loses workers faster than it runs "
                              f"the task: check the nodes' raylet.out and memory, or raise task_retries "
                              f"(now {self.max_retries})") from e
        self.retries.append({"node": key, "attempt": attempt + 1, "error": type(e).__name__, "message": message})
        if self.progress:
            print(f"retry: task {key} (attempt {attempt + 2} of {self.max_retries + 1}) after "
                  f"{type(e).__name__}: {message.split('. ')[0]}", file=sys.stderr)
        self._pending[self._launch(key, fn, args, resources)] = (key, fn, args, resources, attempt + 1)

    def cancel(self) -> None:
        for ref in self._pending:
            self.ray.cancel(ref)
        self._pending.clear()

    def map(self, fn: Callable, calls: Sequence[tuple[str, tuple]], label: str,
            resources: dict[str, dict] | None = None) -> dict[str, Any]:
        """Run `fn(*args)` for each (key, args) as Ray tasks, at most `slots` in flight, each asking for its
        key's `resources`."""
        return run_all(self, fn, calls, label, self.progress, resources)

    def node_counts(self) -> dict[str, int]:
        """Tasks finished per node, by the node's name (`ray start --node-name`) or address."""
        names = {n["NodeID"]: n.get("NodeName") or n.get("NodeManagerAddress") or n["NodeID"][:12]
                 for n in self.ray.nodes()}
        out: dict[str, int] = {}
        for node_id, n in self.tasks_per_node.items():
            name = names.get(node_id, node_id[:12])
            out[name] = out.get(name, 0) + n
        return dict(sorted(out.items()))


def _on_node(fn: Callable, *args):
    """A task: `fn(*args)`, with the node it ran on (the executor counts tasks per node).

    A task asks Ray for one CPU, so it runs on one thread: Ray sets OMP_NUM_THREADS=1 in its workers for
    torch; RAYON_NUM_THREADS=1 does the same for the thread pool of HF `tokenizers` (read when the pool is
    first built, so before this worker's first batch), unless the cluster's environment sets it. With a
    pool per worker over every core, two workers on two cores took 1.13x the wall and CPU time on the same
    batches (reports/benchmarks/tokenizer_threads.md). Token ids do not depend on the threads."""
    os.environ.setdefault("RAYON_NUM_THREADS", "1")
    import ray
    with spreading(True):   # a task may spread pieces of its work over the cluster (`runtime.fanout`)
        return ray.get_runtime_context().get_node_id(), fn(*map(_full, args))
