"""Execute a plan: each node as soon as its deps are done (`curation.runtime.schedule`), on an executor.

A node whose outputs are current (`curation.runtime.node.current`) is skipped and its counts read from
its marker, so the ledger is the same whether or not work was redone. Whether a node is current is
decided when it becomes ready, after its deps ran (a merge's digest reads its parts' markers).

`barriers=True` runs the plan's stages one after another instead (every node also waits for every node
of the stages before its own): the schedule before graph scheduling, kept for the benchmark that
measures what the overlap gains (tests/benchmarks/bench_cluster.py). Both give the same bytes.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from curation.core.outloc import Remote, is_remote
from curation.plan.graph import Plan
from curation.runtime.node import current, run_node
from curation.runtime.publish import StoreState
from curation.runtime.schedule import Skip, run_graph


@dataclass
class Execution:
    markers: dict = field(default_factory=dict)
    executed: int = 0
    skipped: int = 0
    retries: list[dict] = field(default_factory=list)   # system failures a task was retried after


def stage_deps(plan: Plan, barriers: bool = False) -> dict[str, list[str]]:
    """Each node's deps (the node's own list: sibling nodes share one, which the scheduler counts once); with
    `barriers`, also every node of every earlier stage."""
    if not barriers:
        return {n.key: n.deps for n in plan.nodes()}
    deps = {n.key: list(n.deps) for n in plan.nodes()}
    earlier: list[str] = []
    for stage in plan.stages:
        for n in stage.nodes:
            deps[n.key] = list(dict.fromkeys([*deps[n.key], *earlier]))
        earlier += [n.key for n in stage.nodes]
    return deps


def execute(plan: Plan, out: Path, executor, *, barriers: bool = False) -> Execution:
    done = Execution()
    check = getattr(executor, "check_resources", None)
    if check is not None:   # a request no node can meet fails before any task runs
        check({n.key: n.resources for n in plan.nodes()})
    nodes = {n.key: n for n in plan.nodes()}
    labels = {n.key: s.name for s in plan.stages for n in s.nodes}
    state = None
    if is_remote(out):   # every marker and object at once, not a round trip per node as it becomes ready
        state = StoreState(Remote(out), list(nodes))

    def prepare(key: str):
        marker = current(out, nodes[key], state)
        if marker is not None:
            done.skipped += 1
            return Skip(marker)
        done.executed += 1
        return run_node, (str(out), nodes[key]), nodes[key].resources

    done.markers = run_graph(executor, list(nodes), stage_deps(plan, barriers), prepare, labels,
                             getattr(executor, "progress", True))
    done.retries = list(getattr(executor, "retries", []))
    return done
