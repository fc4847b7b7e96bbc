"""What `--ray` refuses, each with exit code 2 and the reason: a head that does not answer (at once, not after
Ray's minutes of retries), a malformed address, a pin without a fleet, a cluster with no box that offers hosts,
and one without room for the configured streams (with each host's room)."""

from __future__ import annotations

import os

import pytest

from tests.support.app_helpers import run_app, video
from tests.support.mqtt_broker import free_port
from tests.support.ray_cluster import LOOPBACK_ENV, ray_cluster

pytest.importorskip("ray")


def test_a_head_that_does_not_answer_or_a_malformed_address_exits_2_at_once():
    port = free_port()
    # Ray alone retries a dead address for minutes: the run's timeout is the check that it does not hang
    done = run_app("--ray", f"127.0.0.1:{port}", "--video", str(video(8)), "--model", "tiny", timeout=90)
    assert done.returncode == 2
    assert f"no Ray head answers at 127.0.0.1:{port}" in done.stderr and "ray start --head" in done.stderr
    done = run_app("--ray", "head-without-port", "--video", str(video(8)), "--model", "tiny", timeout=120)
    assert done.returncode == 2 and "--ray takes auto or HOST:PORT" in done.stderr


def test_a_pinned_stream_without_a_fleet_is_refused(tmp_path):
    site = tmp_path / "site.toml"
    site.write_text(f'[streams.door]\nsource = "{video(8)}"\nnode = "garage"\n')
    done = run_app("--config", str(site), "--model", "tiny", timeout=120)
    assert done.returncode == 2 and "name a node: that is for a fleet (add --ray ADDRESS)" in done.stderr


def test_a_cluster_without_hosts_or_without_room_exits_2_with_the_reason():
    env = {**os.environ, **LOOPBACK_ENV}
    clip = str(video(8))
    with ray_cluster([]) as (cluster, _):
        done = run_app("--ray", cluster.address, "--video", clip, "--model", "tiny", env=env, timeout=180)
    assert done.returncode == 2
    assert "no node of the cluster offers the resource 'edge_host'" in done.stderr
    assert "--resources='{\"edge_host\": 1}'" in done.stderr
    with ray_cluster(["a"]) as (cluster, _):
        done = run_app(
            "--ray", cluster.address, "--stream", f"one={clip}", "--stream", f"two={clip}", "--max-streams", "1",
            "--model", "tiny", env=env, timeout=300,
        )  # fmt: skip
    assert done.returncode == 2, done.stderr[-2000:]
    assert "the cluster has no room for 1 of the 2 streams" in done.stderr
    assert "streams each host fits: a-" in done.stderr and ": 1." in done.stderr
