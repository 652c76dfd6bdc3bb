"""Scheduling by dependencies: a task starts as soon as the tasks it depends on are done.

There is no stage barrier: when a task finishes, the tasks that waited only for it become ready, so the
CPU work of one source overlaps the tokenize work of another and a corpus phase starts while the shards
it does not read are still being processed. Ready tasks start in plan order (the lowest index first), at
most `executor.slots` at a time; the executor decides where and how (`submit`, `wait`, `cancel`).

The outputs cannot depend on the order: every task reads only the outputs of its deps (a task that read
anything else would fail a run to an output URL, `curation.runtime.publish`), and writes only its own.

Sibling tasks of a partitioned phase share one deps list object (every band task reads every shard's
signatures): such a list is counted once, as a group that releases all its tasks when its last dep is done,
so the scheduler holds shards + tasks entries, not shards × partitions (tests/benchmarks/bench_plan_memory.py).
"""
from __future__ import annotations

import heapq
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from curation.runtime.progress import Board


class _Shared:
    """One deps list that several tasks share: how many of its deps are not done yet, and the tasks it holds."""
    __slots__ = ("members", "remaining")

    def __init__(self, remaining: int):
        self.remaining, self.members = remaining, []


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
    or `(fn, args, resources)` to run on the executor (`resources`: what the task asks the scheduler for,
    `curation.core.resources`), or a `Skip`. `labels`: key -> the progress row it counts in. Returns the
    results by key. The first failure cancels what is in flight and is raised (the executor names it)."""
    index = {k: i for i, k in enumerate(keys)}
    waiting: dict[str, int] = {}
    dependents: dict[str, list] = {k: [] for k in keys}   # a dep's waiting tasks, or the shared lists holding it
    uses = Counter(id(d) for d in deps.values() if isinstance(d, list) and d)
    shared: dict[int, _Shared] = {}

    def register(k: str, given: Iterable[str], waiter) -> int:
        mine = set(given)
        unknown = sorted(d for d in mine if d not in index)   # (`mine - index.keys()` copied the keys each time)
        if unknown:   # a planning bug: the task would never start
            raise ValueError(f"task {k} depends on {unknown[:3]}, which are not in the plan")
        for d in mine:
            dependents[d].append(waiter)
        return len(mine)

    for k in keys:
        given = deps.get(k, ())
        if uses.get(id(given), 0) > 1:
            group = shared.get(id(given))
            if group is None:
                group = shared[id(given)] = _Shared(0)
                group.remaining = register(k, given, group)
            group.members.append(k)
            waiting[k] = 1
        else:
            waiting[k] = register(k, given, k)
    ready = [index[k] for k in keys if not waiting[k]]
    heapq.heapify(ready)
    labels = labels or {}
    totals: dict[str, int] = {}
    for k in keys:
        totals[labels.get(k, "tasks")] = totals.get(labels.get(k, "tasks"), 0) + 1
    board = Board(totals, progress)
    results: dict[str, Any] = {}
    in_flight = 0

    def release(k: str) -> None:
        waiting[k] -= 1
        if not waiting[k]:
            heapq.heappush(ready, index[k])

    def finished(key: str) -> None:
        for waiter in dependents[key]:
            if isinstance(waiter, _Shared):
                waiter.remaining -= 1
                if not waiter.remaining:
                    for k in waiter.members:
                        release(k)
            else:
                release(waiter)

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
                fn, args, *resources = what
                executor.submit(key, fn, args, *resources)
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
            progress: bool = True, resources: dict[str, dict] | None = None) -> dict[str, Any]:
    """`fn(*args)` for each independent (key, args), each asking for its key's `resources`: the executors' `map`."""
    args, resources = dict(calls), resources or {}
    return run_graph(executor, list(args), {}, lambda k: (fn, args[k], resources.get(k)),
                     dict.fromkeys(args, label), progress)
