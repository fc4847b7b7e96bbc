"""Shared pytest setup: CPU only, deterministic, quiet transformers warnings."""

import os

import pytest
import torch

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
# Ray (the fleet tests) on 127.0.0.1 only, and no usage report: read when ray is first imported, so set here
os.environ.update({"RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0", "RAY_USAGE_STATS_ENABLED": "0"})
# ... and with Ray's token authentication, as the fleet runs (tests/support/ray_auth.py)
from tests.support.ray_auth import ray_auth_env  # noqa: E402

os.environ.update(ray_auth_env())
# Threads per test process: the cores shared among pytest-xdist's workers (`-n 2` on 2 cores: one each), so that
# workers and the programs they start (which inherit OMP_NUM_THREADS) never ask for more threads than there are
# cores: oversubscribed OpenMP threads wait on each other, and two workers of two threads ran slower than one process.
_WORKERS = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))
THREADS = max(1, min(2, (os.cpu_count() or 1) // _WORKERS))
if _WORKERS > 1:
    os.environ["OMP_NUM_THREADS"] = str(THREADS)
torch.set_num_threads(THREADS)


@pytest.fixture(autouse=True)
def _seed():
    torch.manual_seed(0)


# Fixtures that start servers only when a test asks for them: PostgreSQL for the timeline suite (one server per
# session) and the timeline's two backends; one Ray cluster of the session for the fleet tests that neither kill nor
# add nodes; webhook receivers on free loopback ports, closed after each test
from tests.support.postgres_server import postgres_database, postgres_server, postgres_target  # noqa: E402, F401
from tests.support.ray_cluster import shared_ray_cluster, shared_ray_cluster_pool  # noqa: E402, F401
from tests.support.timeline_backends import timeline_location  # noqa: E402, F401
from tests.support.webhook_receiver import receivers  # noqa: E402, F401

# With pytest-xdist (`bash .ci/run -n 4 --dist loadgroup`, on more cores than 2), a file's tests stay on one
# worker (they share module fixtures: one app run, one server), and every file that starts a Ray cluster goes to
# one worker (the session's shared cluster and a test's own may then run side by side, never two tests' own).
RAY_MARKS = ("ray_cluster", '"--ray"')


def pytest_collection_modifyitems(config, items):
    sources: dict[str, str] = {}
    for item in items:
        if item.get_closest_marker("xdist_group"):
            continue
        path = str(item.path)
        if path not in sources:
            sources[path] = item.path.read_text(errors="replace")
        group = "ray-cluster" if any(mark in sources[path] for mark in RAY_MARKS) else path
        item.add_marker(pytest.mark.xdist_group(group))
