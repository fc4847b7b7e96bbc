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
torch.set_num_threads(min(2, os.cpu_count() or 1))


@pytest.fixture(autouse=True)
def _seed():
    torch.manual_seed(0)


# PostgreSQL for the timeline suite: one server per session (started only when a test asks for it)
from tests.support.postgres_server import postgres_database, postgres_server, postgres_target  # noqa: E402, F401
from tests.support.timeline_backends import timeline_location  # noqa: E402, F401

# Webhook receivers on free loopback ports, closed after each test
from tests.support.webhook_receiver import receivers  # noqa: E402, F401
