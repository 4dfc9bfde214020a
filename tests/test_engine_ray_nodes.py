"""`forensics scan --engine ray --address` on a Ray cluster of two nodes (two raylets on this machine,
one CPU each, started with ray.cluster_utils as `ray start` would on two machines): tasks run on
both nodes, the driver alone writes the store, and the store is the local engine's, table by table."""

from __future__ import annotations

import logging
import signal

import pytest

ray = pytest.importorskip("ray")

from engine_util import SIX_RUNS, cut_archive  # noqa: E402
from forensics import pipeline as P  # noqa: E402
from forensics.engine.compare import diff_stores  # noqa: E402

pytestmark = pytest.mark.slow


@pytest.fixture()
def two_nodes():
    from ray.cluster_utils import Cluster
    if ray.is_initialized():
        pytest.skip("a Ray is already running in this process")
    handlers = {s: signal.getsignal(s) for s in (signal.SIGTERM, signal.SIGINT)}
    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 1, "include_dashboard": False})
    cluster.add_node(num_cpus=1)
    cluster.wait_for_nodes()
    ray.init(address=cluster.address, log_to_driver=False, logging_level=logging.ERROR)
    try:
        yield cluster.address
    finally:
        ray.shutdown()
        cluster.shutdown()
        for s, h in handlers.items():
            signal.signal(s, h)


def test_two_node_cluster_scan_matches_local(two_nodes, tmp_path):
    arch = cut_archive(tmp_path / "a", SIX_RUNS)
    local = P.scan(arch, out=tmp_path / "local", jobs=1, progress=False, reports=False)
    res = P.scan(arch, out=tmp_path / "ray", progress=False, reports=False, engine="ray", address=two_nodes)
    assert res.engine["cpus"] == 2 and res.engine["failures"] == []
    nodes = {st["node_id"] for stages in res.engine["runs"].values() for st in stages.values()}
    assert len(nodes) == 2                  # both raylets ran tasks
    assert set(res.run_ids) == set(local.run_ids) and len(res.run_ids) == len(SIX_RUNS)
    assert diff_stores(local.db, res.db) == {}
