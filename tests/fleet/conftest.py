"""Every fleet test keeps its hosts' spools (fleet/spools.py) in a data folder of its own: a host (in this
process or a Ray worker started by the test's cluster, which inherits the environment) never adopts another
test's spool, and nothing is left in the user's data folder. On the session's shared cluster
(tests/support/ray_cluster.py) the nodes' data folder is a link that `shared_ray_cluster` points at this one.
The CPU kernels are the ones already built (a link), not a build per test."""

from __future__ import annotations

import pytest

from timeline.config import DATA_ENV


@pytest.fixture(autouse=True)
def own_data_folder(tmp_path, monkeypatch):
    folder = tmp_path / "data"
    monkeypatch.setenv(DATA_ENV, str(folder))
    return folder
