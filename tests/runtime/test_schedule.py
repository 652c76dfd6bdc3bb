"""Scheduling by dependencies (curation.runtime.schedule): a node never starts before its deps are done,
independent nodes run side by side, the in-flight bound holds, and the first failure is named with its
cause. On the local executor and on real (embedded) Ray."""
from __future__ import annotations

import errno
import json
import time
from pathlib import Path

import pytest

from curation.errors import CurateError
from curation.plan.graph import load_plan
from curation.runtime.execute import stage_deps
from curation.runtime.local import LocalExecutor
from curation.runtime.schedule import Skip, run_graph
from tests.conftest import REPO, TEXT_DEMO


class Recording:
    """An executor that runs nothing itself: it records submits and finishes tasks in the order `pick` chooses,
    so that a test can drive any interleaving the scheduler must handle."""
    def __init__(self, slots: int, pick=lambda pending: pending[-1]):
        self.slots, self.pick = slots, pick
        self.pending: list[str] = []
        self.events: list[tuple[str, str]] = []
        self.max_in_flight = 0
        self.progress = False

    def submit(self, key, fn, args):
        self.pending.append(key)
        self.events.append(("start", key))
        self.max_in_flight = max(self.max_in_flight, len(self.pending))

    def wait(self):
        key = self.pick(self.pending)
        self.pending.remove(key)
        self.events.append(("end", key))
        return [(key, key.upper())]

    def cancel(self):
        self.pending.clear()


def _check_order(events: list[tuple[str, str]], deps: dict[str, list[str]]) -> None:
    ended: set[str] = set()
    for kind, key in events:
        if kind == "start":
            missing = set(deps[key]) - ended
            assert not missing, f"{key} started before {sorted(missing)[:3]} ended"
        else:
            ended.add(key)


GRAPH = {"a": [], "b": [], "c": ["a", "b"], "d": [], "e": ["c", "d"], "f": ["a"]}


@pytest.mark.parametrize("slots", [1, 2, 3, 6])
@pytest.mark.parametrize("pick", ["first", "last"])
def test_a_task_never_starts_before_its_deps_and_the_bound_holds(slots, pick):
    ex = Recording(slots, (lambda p: p[0]) if pick == "first" else (lambda p: p[-1]))
    out = run_graph(ex, list(GRAPH), GRAPH, lambda k: (None, ()), progress=False)
    assert out == {k: k.upper() for k in GRAPH}
    _check_order(ex.events, GRAPH)
    # never more than the slots; a, b and d are ready at once, so as many of them as the slots allow run
    assert min(slots, 3) <= ex.max_in_flight <= slots


def test_ready_tasks_start_in_plan_order():
    ex = Recording(1)
    run_graph(ex, list(GRAPH), GRAPH, lambda k: (None, ()), progress=False)
    assert [k for kind, k in ex.events if kind == "start"] == ["a", "b", "c", "d", "e", "f"]


def test_a_skipped_task_releases_its_dependents_without_running():
    ex = Recording(2)
    out = run_graph(ex, list(GRAPH), GRAPH, lambda k: Skip("kept") if k in "ac" else (None, ()), progress=False)
    assert out["a"] == out["c"] == "kept" and out["e"] == "E"
    assert ("start", "a") not in ex.events and ("start", "c") not in ex.events
    _check_order(ex.events, {k: [d for d in v if d not in "ac"] for k, v in GRAPH.items()})


def _shared_graph():
    """Six shards, four band-like tasks sharing one deps list (every shard), each with its own reader after
    it, and two tasks sharing another list that names a band-like task and a shard."""
    shards = [f"s{i}" for i in range(6)]
    every, mixed = list(shards), ["b1", "s0"]
    graph = {**{s: [] for s in shards}, **{f"b{i}": every for i in range(4)},
             **{f"r{i}": [f"b{i}"] for i in range(4)}, "m0": mixed, "m1": mixed}
    return graph, every, mixed


@pytest.mark.parametrize("slots", [1, 2, 5])
@pytest.mark.parametrize("pick", ["first", "last"])
def test_tasks_sharing_one_deps_list_wait_for_all_of_it(slots, pick):
    graph, every, mixed = _shared_graph()
    ex = Recording(slots, (lambda p: p[0]) if pick == "first" else (lambda p: p[-1]))
    out = run_graph(ex, list(graph), graph, lambda k: (None, ()), progress=False)
    assert out == {k: k.upper() for k in graph}
    _check_order(ex.events, graph)
    assert graph["b0"] is graph["b3"] is every and graph["m0"] is mixed   # nothing rebuilt or modified them
    assert every == [f"s{i}" for i in range(6)] and mixed == ["b1", "s0"]


def test_a_shared_list_of_skipped_deps_releases_every_task_once():
    graph, _, _ = _shared_graph()
    ex = Recording(3)
    out = run_graph(ex, list(graph), graph, lambda k: Skip("kept") if k.startswith("s") else (None, ()),
                    progress=False)
    starts = [k for kind, k in ex.events if kind == "start"]
    assert sorted(starts) == sorted(k for k in graph if not k.startswith("s")) and len(starts) == len(set(starts))
    assert all(out[f"s{i}"] == "kept" for i in range(6)) and out["m1"] == "M1"


def test_the_schedulers_memory_follows_shards_plus_tasks_not_their_product():
    """300 tasks that each read 2,000 shards: through one shared list the scheduler holds an entry per shard;
    with a copy of the list per task it held 600,000 (what a plan held before its lists were shared)."""
    import tracemalloc
    shards = [f"s{i}" for i in range(2000)]

    def peak(graph) -> int:
        tracemalloc.start()
        run_graph(Recording(4), list(graph), graph, lambda k: Skip(1), progress=False)
        most = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
        return most
    shared = peak({**{s: [] for s in shards}, **{f"t{i}": shards for i in range(300)}})
    copied = peak({**{s: [] for s in shards}, **{f"t{i}": list(shards) for i in range(300)}})
    assert shared * 5 < copied, (shared, copied)


def test_an_unknown_dep_or_a_cycle_is_a_planning_bug_named_as_such():
    with pytest.raises(ValueError, match=r"task c depends on \['zz'\]"):
        run_graph(Recording(2), ["a", "c"], {"c": ["zz"]}, lambda k: (None, ()), progress=False)
    with pytest.raises(ValueError, match="cycle"):
        run_graph(Recording(2), ["a", "b"], {"a": ["b"], "b": ["a"]}, lambda k: (None, ()), progress=False)


def test_the_text_demo_overlaps_its_stages_and_barriers_do_not():
    """On a real plan: with deps only, tokenize tasks start while earlier stages still run; with barriers,
    every node of a stage ends before any node of a later stage starts. Both respect every dep."""
    plan = load_plan(TEXT_DEMO)
    stage_of = {n.key: i for i, s in enumerate(plan.stages) for n in s.nodes}
    keys = [n.key for n in plan.nodes()]
    for barriers in (False, True):
        deps = stage_deps(plan, barriers)
        ex = Recording(4)                      # the newest task first: the most eager interleaving
        run_graph(ex, keys, deps, lambda k: (None, ()), progress=False)
        _check_order(ex.events, stage_deps(plan))
        _check_order(ex.events, deps)
        # crossed: a node started while a node of an earlier stage had not ended yet
        crossed, open_keys = False, set()
        for kind, key in ex.events:
            if kind == "start":
                crossed |= any(stage_of[o] < stage_of[key] for o in open_keys)
                open_keys.add(key)
            else:
                open_keys.discard(key)
        assert crossed is (not barriers)


def test_local_executor_names_the_first_failure_with_its_cause():
    def boom():
        raise OSError(errno.ENOSPC, "No space left on device", "/out/x.bin")

    ran = []
    calls = {"a": (lambda: ran.append("a"), ()), "b": (boom, ()), "c": (lambda: ran.append("c"), ())}
    with pytest.raises(CurateError, match=r"task b failed: OSError\(28") as e:
        run_graph(LocalExecutor(progress=False), list(calls), {"c": ["b"]}, calls.__getitem__, progress=False)
    assert isinstance(e.value.__cause__, OSError) and e.value.__cause__.errno == errno.ENOSPC
    assert ran == ["a"]   # c depends on b: never started


# --- real Ray -------------------------------------------------------------------------------------

@pytest.fixture
def ray_local(ray_local):
    """The shared loopback Ray, with this module's task functions sent by value (the workers cannot
    import a test module)."""
    import sys

    import ray.cloudpickle
    ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])
    yield

def _log(folder: str, key: str, what: str) -> None:
    Path(folder, f"{key}.{what}").write_text(json.dumps(time.time_ns()))


def _task(folder: str, key: str, meet: str | None = None) -> str:
    """Marks its start and end; with `meet`, waits (up to a minute) until task `meet` has started, which
    only happens if both run at the same time."""
    _log(folder, key, "start")
    if meet:
        deadline = time.monotonic() + 60
        while not Path(folder, f"{meet}.start").exists():
            assert time.monotonic() < deadline, f"{key} never ran beside {meet}"
            time.sleep(0.05)
    _log(folder, key, "end")
    return key


def _at(folder: Path, key: str, what: str) -> int:
    return json.loads((folder / f"{key}.{what}").read_text())


@pytest.mark.slow
def test_ray_runs_by_deps_overlaps_independent_tasks_and_bounds_in_flight(ray_local, tmp_path):
    from curation.runtime.ray_executor import RayExecutor

    # a and b must meet (they run at once); c waits for both; d, e, f are independent of everything
    graph = {"a": [], "b": [], "c": ["a", "b"], "d": [], "e": [], "f": []}
    meet = {"a": "b", "b": "a"}
    with RayExecutor(workers=2, progress=False) as ex:
        submitted, finished, most = [0], [0], [0]
        submit, wait = ex.submit, ex.wait

        def counting_submit(key, fn, args):
            submitted[0] += 1
            most[0] = max(most[0], submitted[0] - finished[0])
            submit(key, fn, args)

        def counting_wait():
            done = wait()
            finished[0] += len(done)
            return done

        ex.submit, ex.wait = counting_submit, counting_wait
        out = run_graph(ex, list(graph), graph, lambda k: (_task, (str(tmp_path), k, meet.get(k))), progress=False)
    assert out == {k: k for k in graph}
    assert most[0] == 2                                     # the bound: --workers 2
    for dep in ("a", "b"):
        assert _at(tmp_path, "c", "start") >= _at(tmp_path, dep, "end")
    assert ex.retries == []


def _raise(kind: str):
    if kind == "os":
        raise OSError(errno.ENOSPC, "No space left on device", "/out/tokenized/web/parts/00001.bin.tmp")
    if kind == "value":
        raise ValueError("shard 00001: column `text` is missing")
    raise CurateError("source web: shard 00001 is not JSON lines; fix the file or remove it")


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["os", "value", "curate"])
def test_ray_a_task_error_fails_at_once_with_its_reason_and_cause(ray_local, kind):
    from curation.runtime.ray_executor import RayExecutor

    with RayExecutor(workers=2, progress=False, retries=3) as ex:
        with pytest.raises(CurateError) as e:
            ex.map(_raise, [("tokenize/web/00001", (kind,))], "tokenize")
    assert ex.retries == []                     # a data error is never retried
    if kind == "curate":
        assert str(e.value) == "source web: shard 00001 is not JSON lines; fix the file or remove it"
        return
    assert str(e.value).startswith("task tokenize/web/00001 failed: ")
    cause = e.value.__cause__
    assert type(cause) is (OSError if kind == "os" else ValueError)
    if kind == "os":
        from curation.commands.console import _task_fault
        assert "no space left on the device" in _task_fault(e.value)


def _die_once(flag: str) -> str:
    """Kills its own worker process the first time (as a lost node or an OOM kill would), then succeeds."""
    import os
    if not Path(flag).exists():
        Path(flag).write_text("died")
        os._exit(1)
    return "ok"


@pytest.mark.slow
def test_ray_a_lost_worker_is_retried_and_recorded(ray_local, tmp_path):
    from curation.runtime.ray_executor import RayExecutor

    with RayExecutor(workers=2, progress=False, retries=3) as ex:
        out = ex.map(_die_once, [("signatures/web/00001", (str(tmp_path / "flag"),))], "signatures")
    assert out == {"signatures/web/00001": "ok"}
    assert [(r["node"], r["attempt"], r["error"]) for r in ex.retries] == [("signatures/web/00001", 1,
                                                                             "WorkerCrashedError")]


@pytest.mark.slow
def test_ray_retries_are_bounded(ray_local, tmp_path):
    from curation.runtime.ray_executor import RayExecutor

    with RayExecutor(workers=2, progress=False, retries=0) as ex:
        with pytest.raises(CurateError, match=r"task band/000-000 failed 1 time\(s\) because its worker or node "
                                              r"died \(last: WorkerCrashedError") as e:
            ex.map(_die_once, [("band/000-000", (str(tmp_path / "flag"),))], "band")
    assert "task_retries (now 0)" in str(e.value)


def test_recipe_and_cli_set_the_retry_count(tmp_path):
    from curation.recipe import load_recipe
    loaded = load_recipe(REPO / "recipes" / "demo.yaml", resolve_inputs=False)
    assert loaded.recipe.task_retries == 3
    assert "task_retries" not in loaded.recipe.model_dump()   # how a run executes: in no fingerprint
    text = (REPO / "recipes" / "demo.yaml").read_text()
    (tmp_path / "recipes").mkdir()
    (tmp_path / "tokenizers").symlink_to(REPO / "tokenizers")
    (tmp_path / "recipes" / "demo").symlink_to(REPO / "recipes" / "demo")
    recipe = tmp_path / "recipes" / "demo.yaml"
    recipe.write_text(text + "\ntask_retries: 5\n")
    changed = load_recipe(recipe, resolve_inputs=False)
    assert changed.recipe.task_retries == 5
    assert changed.recipe.model_dump() == loaded.recipe.model_dump()
    from curation.commands.cli import main
    assert main(["run", str(recipe), "--out", str(tmp_path / "out"), "--retries", "-1"]) != 0


def _lists(node) -> tuple:
    return len(node.deps), node.deps[-1], len(node.spec["shards"]), node.spec["shards"][-1], node.spec["band"]


@pytest.mark.slow
def test_ray_ships_a_list_that_sibling_nodes_share_once(ray_local):
    """A partitioned phase's tasks share their shards and deps lists (at 200,000 shards 8.2 MB a node): the
    executor puts each list in the object store once and sends references; the task sees the whole node."""
    import ray.cloudpickle

    from curation.core.node import Node
    from curation.runtime.ray_executor import SHIP_ONCE, RayExecutor
    shards = [["web", f"{i:05d}"] for i in range(5 * SHIP_ONCE)]
    deps = [f"signatures/web/{i:05d}" for i in range(5 * SHIP_ONCE)]
    nodes = {f"band/00{b}": Node("band", None, f"00{b}", "fp", deps=deps, spec={"band": b, "shards": shards})
             for b in range(3)}
    with RayExecutor(workers=2, progress=False) as ex:
        out = run_graph(ex, list(nodes), {k: [] for k in nodes}, lambda k: (_lists, (nodes[k],)), progress=False)
        assert len(ex._stored) == 2                                     # one put per shared list
        assert len(ray.cloudpickle.dumps(ex._slim(nodes["band/001"]))) < 2_000 < len(ray.cloudpickle.dumps(deps))
    assert out == {k: (len(deps), deps[-1], len(shards), shards[-1], n.spec["band"]) for k, n in nodes.items()}
    small = Node("band", None, "x", "fp", deps=deps[:3], spec={"shards": shards[:3]})
    assert ex._slim(small) is small                                      # short lists travel as they are


def _rayon_threads(_key: str) -> str | None:
    import os
    return os.environ.get("RAYON_NUM_THREADS")


@pytest.mark.slow
def test_a_ray_task_runs_tokenizers_on_the_one_cpu_it_asked_for(ray_local):
    """Every task's worker has RAYON_NUM_THREADS=1 (HF tokenizers' pool; reports/benchmarks/tokenizer_threads.md)."""
    from curation.runtime.ray_executor import RayExecutor
    with RayExecutor(workers=2, progress=False) as ex:
        out = run_graph(ex, ["a", "b"], {"a": [], "b": []}, lambda k: (_rayon_threads, (k,)), progress=False)
    assert out == {"a": "1", "b": "1"}
