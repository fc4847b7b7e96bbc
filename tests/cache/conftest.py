"""Fixtures of the cache tests."""

import os

import pytest
import torch

from cache.cpu import kernels as cpu_kernels


@pytest.fixture(scope="module")
def cpu_kernels_built():
    """The CPU kernels must build on this AVX2 machine in CI (EDGE_ASSISTANT_REQUIRE_TOOLS=1); elsewhere skip."""
    if not cpu_kernels.kernels_ready():
        if os.environ.get("EDGE_ASSISTANT_REQUIRE_TOOLS") == "1":
            pytest.fail("the CPU kernels did not build (see the log for the compiler's message)")
        pytest.skip("the CPU kernels are not available here")


@pytest.fixture
def two_threads():
    """Two torch threads, so that the large cases take the kernels' parallel split."""
    before = torch.get_num_threads()
    torch.set_num_threads(2)
    yield
    torch.set_num_threads(before)
