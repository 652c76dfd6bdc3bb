"""A real two-node Ray cluster on loopback: `--address` gives the same bytes as the embedded run."""
import pytest

from curation.commands.run import run
from tests.conftest import DEMO
from tests.outputs import _files, _ledger_rows

pytestmark = pytest.mark.slow


@pytest.fixture
def two_node_cluster():
    import ray
    from ray.cluster_utils import Cluster

    if ray.is_initialized():  # the shared local Ray of other tests: a run must join this cluster instead
        ray.shutdown()

    cluster = Cluster(initialize_head=True, connect=False,
                      head_node_args={"num_cpus": 1, "node_ip_address": "127.0.0.1", "include_dashboard": False})
    cluster.add_node(num_cpus=1, node_ip_address="127.0.0.1")
    cluster.wait_for_nodes()
    try:
        yield cluster
    finally:
        cluster.shutdown()


def test_cluster_run_matches_embedded_run(two_node_cluster, demo_run, tmp_path):
    import ray

    assert two_node_cluster.address.startswith("127.0.0.1:")
    out = tmp_path / "cluster"
    res = run(DEMO, out, address=two_node_cluster.address, progress=False)
    assert not ray.is_initialized()  # the run joined and left; the cluster keeps running
    assert res.executed == len(res.plan.nodes())
    globs = ("tokenized/**/*.bin", "tokenized/**/*.idx", "manifests/*.json", "processed/**/*.parquet",
             "work/minhash/*.parquet")
    a, b = _files(demo_run.out, *globs), _files(out, *globs)
    assert a.keys() == b.keys() and [k for k in a if a[k] != b[k]] == []
    assert _ledger_rows(demo_run.out) == _ledger_rows(out)


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
