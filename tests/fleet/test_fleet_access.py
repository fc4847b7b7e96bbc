"""The fleet's access rules without a cluster: the Ray token file (fleet/ray_token.py), `python -m app
ray-start` (fleet/ray_start.py), the head joining only with a token (fleet/cluster.py), and what a host
actor checks and is created with (fleet/host_access.py). A real cluster: test_fleet_auth.py."""

from __future__ import annotations

import stat
from dataclasses import replace

import pytest

from app.cli import parse_args
from app.config import AppConfig, StreamConfig
from capture.config import CaptureConfig
from capture.policy import SourceRefused
from fleet import ray_start
from fleet.cluster import FleetError, connect
from fleet.host_access import FleetAccess, with_timeline_password
from fleet.hosts import host_config
from fleet.ray_token import TokenError, check_token, ensure_token, use_token
from tests.support.app_helpers import video
from timeline.postgres_target import PASSWORD_ENV


def test_a_new_token_is_private_and_an_existing_one_is_kept(tmp_path):
    path = tmp_path / "ray" / "auth_token"
    assert ensure_token(path) is True
    token = path.read_text()
    assert len(token) == 64 and int(token, 16) >= 0
    assert stat.S_IMODE(path.stat().st_mode) == 0o600 and stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    assert ensure_token(path) is False and path.read_text() == token
    path.chmod(0o644)
    with pytest.raises(TokenError, match="may be read by other users.*chmod 600"):
        ensure_token(path)
    with pytest.raises(TokenError, match="no Ray token at .*copy it to this box"):
        check_token(tmp_path / "missing")


def test_the_head_joins_only_with_token_authentication_and_a_private_token(tmp_path, monkeypatch):
    env = {"RAY_AUTH_TOKEN_PATH": str(tmp_path / "auth_token")}
    with pytest.raises(TokenError, match="no Ray token"):
        use_token(env)
    ensure_token(tmp_path / "auth_token")
    assert use_token(env) == str(tmp_path / "auth_token") and env["RAY_AUTH_MODE"] == "token"
    with pytest.raises(TokenError, match="runs only with Ray's token authentication"):
        use_token({**env, "RAY_AUTH_MODE": "disabled"})
    assert use_token({"RAY_AUTH_TOKEN": "t" * 64}) == "$RAY_AUTH_TOKEN"
    # the command's path: refused before any Ray is tried
    monkeypatch.delenv("RAY_AUTH_TOKEN", raising=False)
    monkeypatch.setenv("RAY_AUTH_TOKEN_PATH", str(tmp_path / "none"))
    with pytest.raises(FleetError, match="cannot join the Ray cluster: no Ray token at"):
        connect("127.0.0.1:1")


def test_ray_start_makes_the_token_on_the_head_and_needs_it_elsewhere(tmp_path, capsys):
    runs = []

    def runner(argv, env):
        runs.append((argv, env))
        return 0

    environ = {"RAY_AUTH_TOKEN_PATH": str(tmp_path / "auth_token"), "PATH": "/usr/bin"}
    join = ["--address", "10.0.0.1:6379", "--resources", '{"edge_host": 1}']
    assert ray_start.main(join, environ, runner) == 2 and not runs
    assert "no Ray token at" in capsys.readouterr().err
    assert ray_start.main(["--head", "--port", "6379", "--node-ip-address", "127.0.0.1"], environ, runner) == 0
    assert "made the cluster's Ray token" in capsys.readouterr().out
    check_token(tmp_path / "auth_token")
    assert ray_start.main(join, environ, runner) == 0
    (head, head_env), (node, node_env) = runs
    assert head[1:] == ["start", "--head", "--port", "6379", "--node-ip-address", "127.0.0.1", "--disable-usage-stats"]
    assert node[1:] == ["start", *join, "--disable-usage-stats"]
    for env in (head_env, node_env):
        assert env["RAY_AUTH_MODE"] == "token" and env["RAY_AUTH_TOKEN_PATH"] == str(tmp_path / "auth_token")


def fleet_config(monkeypatch, *streams: str) -> AppConfig:
    monkeypatch.setenv(PASSWORD_ENV, "db-secret")
    args = ["--ray", "auto", "--model", "tiny", "--timeline", "postgresql://assistant@db.lan/timeline"]
    return AppConfig.from_args(parse_args([*args, *(f"--stream={s}" for s in streams)]))


def test_a_host_takes_only_the_fleets_key_and_only_sources_the_policy_allows(monkeypatch):
    clip = str(video(4))
    config = fleet_config(monkeypatch, f"door={clip}")
    access = FleetAccess.new(config)
    host = access.host
    host.check_key(access.key, "box-0")
    for wrong in ("", "guess", access.key[:-1], None, b"bytes"):
        with pytest.raises(PermissionError, match="does not carry the key"):
            host.check_key(wrong, "box-0")
    host.check_source(config.streams[0])  # configured at start: a local file is the operator's choice
    host.check_source(StreamConfig("again", config.streams[0].capture, config.schedule))  # under any name
    chosen = [
        ("door", "tcp://127.0.0.1:5999?listen=1", "'tcp:' sources cannot be chosen"),
        ("door", str(video(8)), "local paths cannot be chosen"),  # another file, under the configured name
        ("cam", "rtsp://127.0.0.1/live", "127.0.0.0/8"),
        ("cam", "gst:videotestsrc ! fakesink", "gst: pipelines"),
    ]
    for name, source, why in chosen:
        with pytest.raises(SourceRefused, match=why):
            host.check_source(StreamConfig(name, CaptureConfig(source), config.schedule))
    login = CaptureConfig("rtsp://93.184.216.34/live", credentials=("u", "p"))
    with pytest.raises(SourceRefused, match="gets no login"):
        host.check_source(StreamConfig("cam", login, config.schedule))


def test_a_hosts_settings_carry_no_timeline_password_and_its_first_call_brings_it(monkeypatch):
    config = fleet_config(monkeypatch, f"door={video(4)}")
    access = FleetAccess.new(config)
    assert access.timeline_password == "db-secret"
    sent = host_config(config)
    assert sent.timeline.path.password is None and config.timeline.path.password == "db-secret"
    assert with_timeline_password(sent, access.timeline_password).timeline.path.password == "db-secret"
    assert "db-secret" not in repr(access) and access.key not in repr(access)
    no_db = replace(config, timeline=None)
    assert host_config(no_db).timeline is None and FleetAccess.new(no_db).timeline_password is None
