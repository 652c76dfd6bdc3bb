"""`--executor auto`: the local executor for small runs, Ray above the measured size or on a cluster."""
from __future__ import annotations

from curation.commands.run import AUTO_RAY_INPUT_BYTES, auto_executor, choose_executor
from curation.plan.graph import load_plan
from tests.conftest import TEXT_DEMO


def test_small_runs_stay_local_and_big_ones_take_ray():
    assert auto_executor(AUTO_RAY_INPUT_BYTES - 1, 8, 2)[0] == "local"
    chosen, why = auto_executor(AUTO_RAY_INPUT_BYTES, 8, 2)
    assert chosen == "ray" and "8 shard(s)" in why and "2 workers" in why
    assert auto_executor(10 * AUTO_RAY_INPUT_BYTES, 1, 2) == ("local", "auto: 300.0 MB of input in 1 shard(s), "
                                                                        "nothing to run in parallel")
    assert auto_executor(10 * AUTO_RAY_INPUT_BYTES, 8, 1)[0] == "local"


def test_the_demo_runs_locally_unless_asked_or_joining(monkeypatch):
    plan = load_plan(TEXT_DEMO)
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    chosen, why = choose_executor(plan, "auto", None, 2)
    assert chosen == "local" and "below the 30 MB where Ray pays off" in why
    assert choose_executor(plan, "ray", None) == ("ray", "as asked")
    assert choose_executor(plan, "auto", "127.0.0.1:6379")[0] == "ray"
    monkeypatch.setenv("RAY_ADDRESS", "127.0.0.1:6379")
    assert choose_executor(plan, "auto", None) == ("ray", "auto: joining a cluster")
