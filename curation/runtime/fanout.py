"""Work that one task spreads over the cluster while it waits: `Spread(fn, calls)`.

A task of the Ray executor whose output folder every node sees (a shared folder, as a local `--out` on a
cluster must be) may hand pieces of its work to Ray tasks of their own: one CPU each, placed by Ray's SPREAD
strategy, while the task that made them waits (Ray lends its CPU to them meanwhile, so they never wait for a
slot the waiting task holds) or does the part of the work that must stay in one process. A piece lost with
its worker or node is run again by Ray, up to `RETRIES` times; these retries are Ray's own, so the ledger's
`task_retries` (the executor's) does not count them.

Everywhere else the calls run in this process, one after the other, when the results are asked for: under
the local executor, and in a task staged for an output URL (`curation.runtime.publish`), whose folder is
local to its machine. Results come back in call order, so what is written does not depend on where the
calls ran.
"""
from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Sequence

RETRIES = 3   # as the executor's own DEFAULT_RETRIES for a lost task
_spreading = False


@contextlib.contextmanager
def spreading(allowed: bool) -> Iterator[None]:
    """Within the block, `Spread` uses Ray tasks (`allowed`) or runs its calls here; the Ray executor's task
    wrapper allows it, a staged task forbids it."""
    global _spreading
    before, _spreading = _spreading, allowed
    try:
        yield
    finally:
        _spreading = before


def can_spread() -> bool:
    return _spreading


def _call(fn: Callable, *args):
    """A piece as a Ray task: `fn` travels as an argument (pickled by reference when importable), so any callable
    works, builtins included, and one remote function serves every caller."""
    return fn(*args)


_remote_call = None


class Spread:
    """`[fn(*args) for args in calls]`: as Ray tasks started at once where spreading is allowed, else here
    when `results()` is called. Call `results()` once."""

    def __init__(self, fn: Callable, calls: Sequence[tuple]):
        global _remote_call
        self.fn, self.calls, self.refs = fn, list(calls), None
        if _spreading and self.calls:
            if _remote_call is None:
                import ray
                _remote_call = ray.remote(num_cpus=1, max_retries=RETRIES, scheduling_strategy="SPREAD")(_call)
            self.refs = [_remote_call.remote(fn, *args) for args in self.calls]

    @property
    def remote(self) -> bool:
        return self.refs is not None

    def results(self) -> list:
        if self.refs is None:
            return [self.fn(*args) for args in self.calls]
        import ray
        try:
            return ray.get(self.refs)
        except BaseException:
            for ref in self.refs:   # the task failed or was cancelled: stop what it started
                ray.cancel(ref, force=True)
            raise
