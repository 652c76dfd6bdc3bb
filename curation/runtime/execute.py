"""Execute a plan: its stages in table order, each stage's pending nodes in parallel on an executor.

A node whose outputs are current (`curation.runtime.node.current`) is skipped and its counts read from
its marker, so the ledger is the same whether or not work was redone.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from curation.plan.graph import Plan
from curation.runtime.node import current, run_node


@dataclass
class Execution:
    markers: dict = field(default_factory=dict)
    executed: int = 0
    skipped: int = 0


def execute(plan: Plan, out: Path, executor) -> Execution:
    done = Execution()
    check = getattr(executor, "check_resources", None)
    if check is not None:   # a request no node can meet fails before any task runs
        check({n.key: n.resources for n in plan.nodes()})
    for stage in plan.stages:
        todo = []
        for node in stage.nodes:
            marker = current(out, node)
            if marker is not None:
                done.markers[node.key] = marker
            else:
                todo.append(node)
        done.skipped += len(stage.nodes) - len(todo)
        done.executed += len(todo)
        if todo:
            done.markers.update(executor.map(run_node, [(n.key, (str(out), n)) for n in todo], stage.name,
                                             resources={n.key: n.resources for n in todo}))
    return done
