"""Shared pytest setup: CPU only, deterministic, quiet transformers warnings."""

import os

import pytest
import torch

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
torch.set_num_threads(min(2, os.cpu_count() or 1))


@pytest.fixture(autouse=True)
def _seed():
    torch.manual_seed(0)


# PostgreSQL for the timeline suite: one server per session (started only when a test asks for it)
from tests.postgres_server import postgres_database, postgres_server, postgres_target  # noqa: E402, F401
from tests.timeline_backends import timeline_location  # noqa: E402, F401

# Webhook receivers on free loopback ports, closed after each test
from tests.webhook_receiver import receivers  # noqa: E402, F401
