"""A real multi-node Ray cluster on this machine for the fleet tests (`ray.cluster_utils.Cluster`), kept on
127.0.0.1: Ray otherwise binds the machine's interface address. A head that runs no host (0 CPUs, no
`edge_host`) and nodes that offer one host each, labelled for pins. Usage stats stay off (no traffic leaves).

The tests share one cluster of the session (`shared_ray_cluster`: nodes "a" and "b", started at its first use, shut
down after its last): each gets a fresh namespace, and the nodes' data folder (a link, `$EDGE_ASSISTANT_DATA` of
their processes) points at the test's own. A test may add nodes and remove any (a lost node): after it, the nodes it
added are removed and a shared one it removed is replaced by a new node with the same label. After each test no
host actor may be left: the fixture waits until every `edge_host` is free again, and fails the test that leaked one
(the cluster is then replaced, so later tests do not inherit it)."""

from __future__ import annotations

import contextlib
import itertools
import os
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from timeline.config import DATA_ENV

LOOPBACK_ENV = {"RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0", "RAY_USAGE_STATS_ENABLED": "0"}  # also set in conftest
os.environ.update(LOOPBACK_ENV)  # before ray is imported: it reads them once
# a lost node is found in about a second instead of Ray's default ~15 s
HEALTH = {"health_check_period_ms": 500, "health_check_failure_threshold": 3, "health_check_initial_delay_ms": 0}
SHARED_LABELS = ["a", "b"]
CLEAN_WAIT_S = 60  # bound on a test's hosts ending after it (Ray ends a stopped driver's actors in a second or two)


@contextlib.contextmanager
def ray_cluster(labels: list[str]) -> Iterator[tuple[object, list[object]]]:
    """(the Cluster, its host nodes): one node per label, each offering `edge_host: 1` with that `edge_node` label.
    Always shut down, whatever the test did."""
    cluster = start_cluster(labels)
    try:
        yield cluster, cluster.host_nodes
    finally:
        cluster.shutdown()


def start_cluster(labels: list[str]):
    """A started Cluster (see `ray_cluster`), its host nodes in `host_nodes`; the caller shuts it down."""
    from ray.cluster_utils import Cluster

    assert Cluster.__module__ and os.environ["RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"] == "0"
    cluster = Cluster(
        initialize_head=True,
        head_node_args={"num_cpus": 0, "include_dashboard": False, "_system_config": HEALTH},
    )
    try:
        cluster.host_nodes = [add_host_node(cluster, label) for label in labels]
        cluster.wait_for_nodes()
        host = cluster.address.rpartition(":")[0]
        assert host == "127.0.0.1", f"the test cluster must stay on loopback, it is on {host}"
    except BaseException:
        cluster.shutdown()
        raise
    return cluster


def add_host_node(cluster, label: str):
    return cluster.add_node(num_cpus=1, resources={"edge_host": 1}, labels={"edge_node": label})


def leftovers(cluster) -> list[str]:
    """What a finished test left on `cluster`: actors not dead, dead actors whose process still runs, and busy
    `edge_host` units."""
    import psutil

    state = cluster.global_state
    left = []
    for actor in state.actor_table(None).values():
        name = actor["Name"] or actor["ActorClassName"]
        if actor["State"] != "DEAD":
            left.append(f"actor {name} ({actor['State']})")
        elif actor["Pid"] and psutil.pid_exists(actor["Pid"]):
            with contextlib.suppress(psutil.Error):
                if "ray::" in " ".join(psutil.Process(actor["Pid"]).cmdline()):
                    left.append(f"the process of actor {name} (pid {actor['Pid']})")
    total = state.cluster_resources().get("edge_host", 0)
    free = state.available_resources().get("edge_host", 0)
    if free != total:
        left.append(f"{total - free:g} of {total:g} edge_host units in use")
    return left


@dataclass
class SharedCluster:
    """One test's use of the session's cluster: its `address`, the host `nodes`, and a `namespace` of its own."""

    cluster: object
    namespace: str

    @property
    def address(self) -> str:
        return self.cluster.address

    @property
    def nodes(self) -> list[object]:
        return self.cluster.host_nodes


class ClusterPool:
    """The session's shared cluster (nodes SHARED_LABELS): started at the first lease, replaced after a leak."""

    def __init__(self, folder: Path) -> None:
        self.box = folder / "box"  # the link the nodes' processes know as their data folder
        self.idle = folder / "idle"  # where it points between leases
        self.idle.mkdir(mode=0o700)
        self.cluster = None
        self.namespaces = itertools.count(1)

    def _point_box(self, target: Path) -> None:
        new = self.box.with_name("box.new")
        new.unlink(missing_ok=True)
        new.symlink_to(target, target_is_directory=True)
        new.replace(self.box)  # atomic: the nodes never see no folder

    def _start(self) -> None:
        self._point_box(self.idle)
        saved = os.environ.get(DATA_ENV)
        os.environ[DATA_ENV] = str(self.box)  # the nodes' processes inherit the environment as they start
        try:
            self.cluster = start_cluster(SHARED_LABELS)
        finally:
            if saved is None:
                os.environ.pop(DATA_ENV)
            else:
                os.environ[DATA_ENV] = saved

    @contextlib.contextmanager
    def lease(self, data: Path) -> Iterator[SharedCluster]:
        """The cluster for one test (or one module's fleet) with data folder `data`; afterwards AssertionError
        naming what was left when a host did not end within CLEAN_WAIT_S (and the cluster is shut down)."""
        if self.cluster is None:
            self._start()
        data.mkdir(mode=0o700, parents=True, exist_ok=True)
        self._point_box(data)
        try:
            yield SharedCluster(self.cluster, f"edge-assistant-test-{next(self.namespaces)}")
        finally:
            deadline = time.monotonic() + CLEAN_WAIT_S
            while left := leftovers(self.cluster):
                if time.monotonic() > deadline:
                    self.close()
                    raise AssertionError(f"the test left on the shared Ray cluster: {'; '.join(left)}")
                time.sleep(0.2)
            self._restore_nodes()
            self._point_box(self.idle)

    def _restore_nodes(self) -> None:
        """The nodes SHARED_LABELS again after a test that added or removed nodes: the ones it added are removed, a
        shared node it removed is replaced by a new one with its label (a node costs seconds, a cluster many)."""
        if self.cluster is None:
            return
        shared = self.cluster.host_nodes
        for node in list(self.cluster.worker_nodes):
            if node not in shared:
                self.cluster.remove_node(node)
        lost = [i for i, node in enumerate(shared) if node not in self.cluster.worker_nodes]
        if not lost:
            return
        saved = os.environ.get(DATA_ENV)
        os.environ[DATA_ENV] = str(self.box)  # as at the start: the new node's processes know the link
        try:
            for i in lost:
                shared[i] = add_host_node(self.cluster, SHARED_LABELS[i])
            self.cluster.wait_for_nodes()
        finally:
            if saved is None:
                os.environ.pop(DATA_ENV)
            else:
                os.environ[DATA_ENV] = saved

    def close(self) -> None:
        if self.cluster is not None:
            self.cluster.shutdown()
            self.cluster = None


@pytest.fixture(scope="session")
def shared_ray_cluster_pool(tmp_path_factory) -> Iterator[ClusterPool]:
    pool = ClusterPool(tmp_path_factory.mktemp("shared-ray-cluster"))
    try:
        yield pool
    finally:
        pool.close()


def lease_for(pool: ClusterPool, request, data: Path) -> contextlib.AbstractContextManager[SharedCluster]:
    """`pool.lease(data)` for the test or module of `request`; after the last test of the session that needs the
    cluster, it is shut down (it would only take memory and CPU from the tests after it)."""

    @contextlib.contextmanager
    def leased() -> Iterator[SharedCluster]:
        with pool.lease(data) as shared:
            yield shared
        items = request.session.items
        mine = [i for i, item in enumerate(items) if item.nodeid.startswith(request.node.nodeid)]
        later = items[mine[-1] + 1 :] if mine else []
        if not any("shared_ray_cluster_pool" in item.fixturenames for item in later):
            pool.close()

    return leased()


@pytest.fixture
def shared_ray_cluster(shared_ray_cluster_pool, request, tmp_path, monkeypatch) -> Iterator[SharedCluster]:
    """The session's cluster (nodes "a" and "b") for this test, its nodes' data folder the test's
    `$EDGE_ASSISTANT_DATA` (a fresh one when the test has none). Without ray installed the test fails, as every
    test whose tool is missing does (start_cluster imports it)."""
    if DATA_ENV in os.environ:
        data = Path(os.environ[DATA_ENV])
    else:
        data = tmp_path / "data"
        monkeypatch.setenv(DATA_ENV, str(data))
    with lease_for(shared_ray_cluster_pool, request, data) as shared:
        yield shared
