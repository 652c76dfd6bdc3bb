"""A real two-node Ray cluster on loopback: `--address` gives the same bytes as the embedded run.

This is the fallback for machines without `unshare -n`, where the `ray start` modules skip. Where they run
(CI), they prove the same and more on clusters as operators start them (the same bytes through
`--address`: test_ray_start_cluster; tasks on every node, two of them lost: test_ray_faults), so this
module skips there rather than run the text demo on a third cluster (CI time)."""
import pytest

from curation.commands.run import run
from tests.conftest import TEXT_DEMO
from tests.outputs import _files, _ledger_rows
from tests.runtime.test_ray_start_cluster import _netns_available

pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(_netns_available(), reason="`unshare -n` works here: the `ray start` cluster "
                                 "modules (test_ray_start_cluster, test_ray_faults) prove this on real clusters")]


def test_cluster_run_matches_embedded_run(two_node_cluster, text_run, tmp_path):
    import ray

    assert two_node_cluster.address.startswith("127.0.0.1:")
    out = tmp_path / "cluster"
    res = run(TEXT_DEMO, out, address=two_node_cluster.address, progress=False)
    assert not ray.is_initialized()  # the run joined and left; the cluster keeps running
    assert res.executed == len(res.plan.nodes())
    globs = ("tokenized/**/*.bin", "tokenized/**/*.idx", "manifests/*.json", "processed/**/*.parquet",
             "work/minhash/*.parquet")
    a, b = _files(text_run.out, *globs), _files(out, *globs)
    assert a.keys() == b.keys() and [k for k in a if a[k] != b[k]] == []
    assert _ledger_rows(text_run.out) == _ledger_rows(out)


def test_cluster_tasks_ran_on_both_nodes(two_node_cluster):
    import ray

    from curation.runtime.ray_executor import RayExecutor

    def where(_):
        import time
        time.sleep(0.5)
        return ray.get_runtime_context().get_node_id()

    with RayExecutor(workers=2, address=two_node_cluster.address, progress=False) as rt:
        nodes = rt.map(where, [(str(i), (i,)) for i in range(6)], "probe")
    assert len(set(nodes.values())) == 2
