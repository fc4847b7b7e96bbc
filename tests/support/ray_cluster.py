"""A real multi-node Ray cluster on this machine for the fleet tests (`ray.cluster_utils.Cluster`), kept on
127.0.0.1: Ray otherwise binds the machine's interface address. A head that runs no host (0 CPUs, no
`edge_host`) and nodes that offer one host each, labelled for pins. Usage stats stay off (no traffic leaves)."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator

LOOPBACK_ENV = {"RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0", "RAY_USAGE_STATS_ENABLED": "0"}  # also set in conftest
os.environ.update(LOOPBACK_ENV)  # before ray is imported: it reads them once
# a lost node is found in about a second instead of Ray's default ~15 s
HEALTH = {"health_check_period_ms": 500, "health_check_failure_threshold": 3, "health_check_initial_delay_ms": 0}


@contextlib.contextmanager
def ray_cluster(labels: list[str]) -> Iterator[tuple[object, list[object]]]:
    """(the Cluster, its host nodes): one node per label, each offering `edge_host: 1` with that `edge_node` label.
    Always shut down, whatever the test did."""
    from ray.cluster_utils import Cluster

    assert Cluster.__module__ and os.environ["RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"] == "0"
    cluster = Cluster(
        initialize_head=True,
        head_node_args={"num_cpus": 0, "include_dashboard": False, "_system_config": HEALTH},
    )
    try:
        nodes = [add_host_node(cluster, label) for label in labels]
        cluster.wait_for_nodes()
        host = cluster.address.rpartition(":")[0]
        assert host == "127.0.0.1", f"the test cluster must stay on loopback, it is on {host}"
        yield cluster, nodes
    finally:
        cluster.shutdown()


def add_host_node(cluster, label: str):
    return cluster.add_node(num_cpus=1, resources={"edge_host": 1}, labels={"edge_node": label})
