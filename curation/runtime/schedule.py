"""Scheduling by dependencies: a task starts as soon as the tasks it depends on are done.

There is no stage barrier: when a task finishes, the tasks that waited only for it become ready, so the
CPU work of one source overlaps the tokenize work of another and a corpus phase starts while the shards
it does not read are still being processed. Ready tasks start in plan order (the lowest index first), at
most `executor.slots` at a time; the executor decides where and how (`submit`, `wait`, `cancel`).

The outputs cannot depend on the order: every task reads only the outputs of its deps (a task that read
anything else would fail a run to an output URL, `curation.runtime.publish`), and writes only its own.
"""
from __future__ import annotations

import heapq
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from curation.runtime.progress import Board


class Skip:
    """`prepare`'s answer for a task that needs no run: its result is already known."""
    __slots__ = ("result",)

    def __init__(self, result: Any):
        self.result = result


def run_graph(executor, keys: Sequence[str], deps: dict[str, Iterable[str]], prepare: Callable[[str], Any],
              labels: dict[str, str] | None = None, progress: bool = True,
              on_start: Callable[[str], None] | None = None) -> dict[str, Any]:
    """Run every key of `keys` (in that order among the ready ones) once all its `deps` are done.

    `prepare(key)`, called when the key becomes ready (its deps' outputs exist then), returns `(fn, args)`
    to run on the executor or a `Skip`. `labels`: key -> the progress row it counts in. Returns the
    results by key. The first failure cancels what is in flight and is raised (the executor names it)."""
    index = {k: i for i, k in enumerate(keys)}
    waiting: dict[str, int] = {}
    dependents: dict[str, list[str]] = {k: [] for k in keys}
    for k in keys:
        mine = set(deps.get(k, ()))
        unknown = sorted(mine - index.keys())
        if unknown:   # a planning bug: the task would never start
            raise ValueError(f"task {k} depends on {unknown[:3]}, which are not in the plan")
        waiting[k] = len(mine)
        for d in mine:
            dependents[d].append(k)
    ready = [index[k] for k in keys if not waiting[k]]
    heapq.heapify(ready)
    labels = labels or {}
    totals: dict[str, int] = {}
    for k in keys:
        totals[labels.get(k, "tasks")] = totals.get(labels.get(k, "tasks"), 0) + 1
    board = Board(totals, progress)
    results: dict[str, Any] = {}
    in_flight = 0

    def finished(key: str) -> None:
        for k in dependents[key]:
            waiting[k] -= 1
            if not waiting[k]:
                heapq.heappush(ready, index[k])

    try:
        while ready or in_flight:
            while ready and in_flight < max(1, executor.slots):
                key = keys[heapq.heappop(ready)]
                what = prepare(key)
                if isinstance(what, Skip):
                    results[key] = what.result
                    board.skip(labels.get(key, "tasks"))
                    finished(key)
                    continue
                fn, args = what
                executor.submit(key, fn, args)
                in_flight += 1
                if on_start:
                    on_start(key)
            if not in_flight:
                continue
            for key, result in executor.wait():
                in_flight -= 1
                results[key] = result
                board.advance(labels.get(key, "tasks"))
                finished(key)
    except BaseException:
        executor.cancel()
        raise
    finally:
        board.close()
    if len(results) != len(keys):   # a cycle: only a planning bug can make one
        stuck = sorted(set(keys) - results.keys(), key=index.__getitem__)
        raise ValueError(f"tasks {stuck[:3]} never became ready (their deps form a cycle)")
    return results


def run_all(executor, fn: Callable, calls: Sequence[tuple[str, tuple]], label: str,
            progress: bool = True) -> dict[str, Any]:
    """`fn(*args)` for each independent (key, args): the executors' `map`."""
    args = dict(calls)
    return run_graph(executor, list(args), {}, lambda k: (fn, args[k]), dict.fromkeys(args, label), progress)
