"""Work a task spreads (curation.runtime.fanout): here, in call order, unless a Ray task allows it; as Ray tasks of
their own where it does, results still in call order; never from a task staged for an output URL, whose folder
no other node can see."""
from __future__ import annotations

import os

import pytest

from curation.core.node import Node
from curation.runtime.fanout import Spread, can_spread, spreading


def test_outside_a_ray_task_the_calls_run_here_in_order_when_asked_for():
    calls = []
    spread = Spread(lambda x: calls.append(x) or -x, [(3,), (1,), (2,)])
    assert not spread.remote and calls == []            # nothing ran yet
    assert spread.results() == [-3, -1, -2] and calls == [3, 1, 2]
    assert not can_spread()


def test_spreading_is_scoped_and_restored_after_an_error():
    with spreading(True):
        assert can_spread()
        with pytest.raises(ValueError), spreading(False):
            assert not can_spread()
            raise ValueError
        assert can_spread()
    assert not can_spread()


def test_a_staged_task_never_spreads(monkeypatch):
    """A task whose output is a URL runs in a staging folder of its own machine: its parts could not be written by
    tasks elsewhere, so spreading is off inside it even in a Ray task that allows it."""
    import curation.runtime.publish as publish
    from curation.runtime.node import run_node

    seen = []
    monkeypatch.setattr(publish, "run_staged", lambda *a, **k: seen.append(can_spread()) or {})
    with spreading(True):
        run_node("s3://bucket/out", Node("merge", "web", None, "fp"))
        assert can_spread()
    assert seen == [False]


@pytest.mark.slow   # starts the embedded Ray when no test of this worker has
def test_in_a_ray_task_the_calls_are_ray_tasks_and_come_back_in_order(ray_local):
    import ray

    from curation.runtime.ray_executor import _on_node

    # runs as a task of the executor would (`_on_node` allows spreading); the pieces are functions a worker can
    # import (this test module is not importable there)
    def spread_squares(xs):
        import operator
        squares, pids = Spread(operator.mul, [(x, x) for x in xs]), Spread(os.getpid, [()] * 4)
        return squares.remote, os.getpid(), squares.results(), pids.results()

    task = ray.remote(num_cpus=1, max_retries=0)(_on_node)
    _, (remote, parent, squares, pids) = ray.get(task.remote(spread_squares, [5, 1, 4, 2, 3]))
    assert remote and squares == [25, 1, 16, 4, 9]
    assert set(pids) - {parent}      # tasks of their own: other worker processes
