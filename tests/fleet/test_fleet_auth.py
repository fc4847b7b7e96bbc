"""The fleet against other drivers of its Ray cluster (a real cluster on 127.0.0.1, token authentication on as
conftest sets it up, tests/support/ray_auth.py): a driver without the token is refused by Ray; one with it (a
co-tenant) finds the host actors by name but cannot read the camera login or the timeline's password, drain the
host's events or start a source; and the head itself cannot start a source the policy refuses on the host. And
a head started by the project's command (`python -m app ray-start --head`) refuses a driver without its token."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import textwrap
import time

import pytest

import fleet.cluster
from app.cli import parse_args
from app.config import AppConfig, StreamConfig
from app.source_credentials import env_name
from bus import EventBus
from capture.config import CaptureConfig
from fleet.cluster import FleetError, check_reachable, connect
from fleet.coordinator import Coordinator
from tests.support.app_helpers import REPO
from tests.support.mqtt_broker import free_port
from tests.support.ray_auth import outsider, without_token
from timeline.postgres_target import PASSWORD_ENV

pytest.importorskip("ray")

CAMERA_PASSWORD = "cam-s3cret-9f2"
TIMELINE_PASSWORD = "db-s3cret-4c1"

# what another driver tries on every host actor it finds; prints each outcome as JSON
CO_TENANT = textwrap.dedent(
    """
    import json, sys
    import ray
    ray.init(address=sys.argv[1], namespace=sys.argv[2], log_to_driver=False, logging_level="ERROR")
    from app.config import StreamConfig
    from capture.config import CaptureConfig
    from watches.scheduler import StandingQuestion

    def outcome(call):
        try:
            return "answered: " + repr(ray.get(call(), timeout=60))
        except Exception as err:
            return "refused: " + str(err).strip().splitlines()[-1]

    listen = StreamConfig("x", CaptureConfig("tcp://127.0.0.1:5999?listen=1"), StandingQuestion())
    found = {}
    for named in ray.util.list_named_actors(all_namespaces=True):
        actor = ray.get_actor(named["name"], namespace=named["namespace"])
        found[named["name"]] = {
            "read": outcome(lambda: actor.__ray_call__.remote(lambda host: host.config.timeline.path.password)),
            "drain": outcome(lambda: actor.drain.remote()),
            "drain with a guess": outcome(lambda: actor.drain.remote("guess", 0.0)),
            "streams": outcome(lambda: actor.streams.remote()),
            "start": outcome(lambda: actor.start_stream.remote(listen)),
            "start with a guess": outcome(lambda: actor.start_stream.remote("guess", listen)),
        }
    print(json.dumps(found))
    """
)


def co_tenant(address: str, env: dict[str, str]) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-c", CO_TENANT, address, fleet.cluster.NAMESPACE],
        cwd=REPO, env=env, capture_output=True, text=True, timeout=240,
    )  # fmt: skip


def test_other_drivers_get_nothing_from_the_fleet_and_the_hosts_keep_the_source_policy(
    monkeypatch, shared_ray_cluster, tmp_path
):
    monkeypatch.setenv(env_name("door"), f"viewer:{CAMERA_PASSWORD}")
    monkeypatch.setenv(PASSWORD_ENV, TIMELINE_PASSWORD)
    monkeypatch.setattr(fleet.cluster, "NAMESPACE", shared_ray_cluster.namespace)  # the head joins a fresh one
    address = shared_ray_cluster.address  # nodes a and b: a host on each, `door` pinned to a
    site = tmp_path / "site.toml"
    site.write_text('[streams.door]\nsource = "rtsp://127.0.0.1:9/cam"\nnode = "a"\n')
    args = ["--ray", address, "--model", "tiny", "--every", "0", "--config", str(site),
            "--timeline", "postgresql://assistant@127.0.0.1:9/timeline"]  # fmt: skip
    config = AppConfig.from_args(parse_args(args))
    assert config.streams[0].capture.credentials == ("viewer", CAMERA_PASSWORD)
    ray = connect(address)  # the head's driver: with the token
    coordinator = Coordinator(config, config.fleet, EventBus(), ray)
    try:
        coordinator.start()  # the camera is down: the stream runs on its host and reconnects
        assert coordinator.describe().startswith("door on a-")

        # a driver without the cluster's token: Ray refuses it
        refused = co_tenant(address, outsider(dict(os.environ)))
        assert refused.returncode != 0 and "Failed to connect to Ray cluster" in refused.stderr, refused.stderr
        assert CAMERA_PASSWORD not in refused.stdout + refused.stderr
        assert "Authentication token is missing or incorrect" in refused.stderr

        # a co-tenant with the token finds every host by name; every call is refused, nothing secret comes back
        inside = co_tenant(address, dict(os.environ))
        assert inside.returncode == 0, inside.stderr[-3000:]
        for secret in (CAMERA_PASSWORD, TIMELINE_PASSWORD):
            assert secret not in inside.stdout + inside.stderr
        found = json.loads(inside.stdout.strip().splitlines()[-1])
        assert sorted(name[: len("host-a-")] for name in found) == ["host-a-", "host-b-"]
        for outcomes in found.values():
            for what, result in outcomes.items():
                assert result.startswith("refused: "), (what, result)
            assert "runs no caller's code" in outcomes["read"]
            assert "does not carry the key" in outcomes["drain with a guess"]
            assert "does not carry the key" in outcomes["start with a guess"]

        # the head (it has the key) asking the stream's host directly for a source the policy refuses: refused there
        host = coordinator.hosts[coordinator.owner["door"]]
        listen = StreamConfig("x", CaptureConfig("tcp://127.0.0.1:5999?listen=1"), config.schedule)
        with pytest.raises(ray.exceptions.RayTaskError, match="'tcp:' sources cannot be chosen while running"):
            ray.get(host.actor.start_stream.remote(host.key, listen), timeout=60)
        assert ray.get(host.actor.streams.remote(host.key), timeout=60) == ["door"]
    finally:
        coordinator.stop()
        ray.shutdown()


JOIN = "import ray, sys; ray.init(address=sys.argv[1], logging_level='ERROR'); print('joined', len(ray.nodes()))"


def joins(address: str, *envs: dict[str, str]) -> list[subprocess.CompletedProcess]:
    """A driver joining at `address` with each of `envs`, side by side."""
    drivers = [
        subprocess.Popen(
            [sys.executable, "-c", JOIN, address],
            cwd=REPO,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for env in envs
    ]
    try:
        outputs = [driver.communicate(timeout=180) for driver in drivers]
    finally:
        for driver in drivers:
            driver.kill()  # only one still running (a timeout)
    return [
        subprocess.CompletedProcess(d.args, d.returncode, out, err)
        for d, (out, err) in zip(drivers, outputs, strict=True)
    ]


def test_a_head_started_by_ray_start_makes_its_token_and_refuses_a_driver_without_it(tmp_path):
    token = tmp_path / "ray" / "auth_token"
    env = {**without_token(dict(os.environ)), "RAY_AUTH_TOKEN_PATH": str(token)}
    port = free_port()  # ephemeral: outside Ray's worker ports (10002-19999)
    session = tempfile.mkdtemp(prefix="ray-", dir="/tmp")  # short: Ray's socket paths live under it
    command = [sys.executable, "-m", "app", "ray-start", "--head", "--port", str(port), "--block", "--temp-dir",
               session, "--node-ip-address", "127.0.0.1", "--num-cpus", "0", "--include-dashboard=false"]  # fmt: skip
    head = subprocess.Popen(command, cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and head.poll() is None:
            try:
                check_reachable(f"127.0.0.1:{port}", timeout=1.0)
                break
            except FleetError:
                time.sleep(0.5)
        assert oct(token.stat().st_mode & 0o777) == "0o600" and len(token.read_text()) == 64
        # as `python -m app --ray` joins, and without the token
        joined, refused = joins(f"127.0.0.1:{port}", {**env, "RAY_AUTH_MODE": "token"}, outsider(env))
    finally:
        head.terminate()  # `ray-start` became `ray start --block`: it stops the node's processes
        output = head.communicate(timeout=60)[0]
        shutil.rmtree(session, ignore_errors=True)
    assert "made the cluster's Ray token" in output and "Ray runtime started" in output, output[-3000:]
    assert joined.returncode == 0 and "joined 1" in joined.stdout, joined.stderr[-3000:]
    assert refused.returncode != 0 and "Authentication token is missing or incorrect" in refused.stderr
