"""A stream's login from a private file or the environment, never in argv or the TOML: read, checked, kept out
of the URL that is shown, and joined only when the source is opened (a real login server on 127.0.0.1 checks
that FFmpeg logs in with it, special characters included)."""

from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest

from app.cli import parse_args
from app.config import AppConfig
from app.source_credentials import env_name, stream_credentials
from app.streams import StreamSpec
from capture import CaptureConfig, CaptureThread, ReconnectPolicy
from capture.credentials import has_userinfo, read_credentials_file, with_userinfo
from tests.support.app_helpers import of_type, read_log
from tests.support.capture_helpers import Media, drain
from tests.support.in_process_main import run_app_here, run_main
from tests.support.secret_servers import LoginTsServer

ONE_RETRY = ReconnectPolicy(initial_delay_s=0.05, max_delay_s=0.1, max_attempts=1)
PASSWORD = "p@ss:w/rd%20 SECRET"  # '@', ':', '/', '%' and a blank: all percent-encoded when joined


def cred_file(folder: Path, text: str, mode: int = 0o600, name: str = "cam.cred") -> Path:
    path = folder / name
    path.write_text(text)
    path.chmod(mode)
    return path


@pytest.fixture(scope="module")
def ts_bytes(tmp_path_factory) -> bytes:
    media = Media(tmp_path_factory.mktemp("creds"))
    return media.video("live.ts", "libx264", (96, 64), fps=10, duration_s=4.0, options={"g": "10"}).read_bytes()


def test_read_a_private_file(tmp_path):
    assert read_credentials_file(cred_file(tmp_path, f"viewer:{PASSWORD}\n")) == ("viewer", PASSWORD)
    assert read_credentials_file(cred_file(tmp_path, "a:b\r\nignored\n", 0o400)) == ("a", "b")


@pytest.mark.parametrize(
    ("text", "mode", "says"),
    [
        ("viewer:pw\n", 0o640, "chmod 600"),
        ("viewer:pw\n", 0o604, "other users may read it"),
        ("no colon here\n", 0o600, "user:password"),
        (":pw\n", 0o600, "user:password"),
        ("viewer:\n", 0o600, "user:password"),
        ("", 0o600, "empty"),
    ],
)
def test_unusable_files_are_refused_without_quoting_them(tmp_path, text, mode, says):
    path = cred_file(tmp_path, text, mode)
    with pytest.raises(ValueError, match=says) as err:
        read_credentials_file(path)
    assert "pw" not in str(err.value).replace(str(path), "")


def test_a_missing_file_or_a_link_is_refused(tmp_path):
    with pytest.raises(ValueError, match="No such file"):
        read_credentials_file(tmp_path / "missing")
    target = cred_file(tmp_path, "a:b")
    (tmp_path / "link").symlink_to(target)
    with pytest.raises(ValueError, match="credentials file"):
        read_credentials_file(tmp_path / "link")


def test_joined_percent_encoded_and_never_shown():
    url = with_userinfo("rtsp://10.0.0.5:554/x?y=1", ("vi ewer", PASSWORD))
    assert url == "rtsp://vi%20ewer:p%40ss%3Aw%2Frd%2520%20SECRET@10.0.0.5:554/x?y=1"
    assert has_userinfo(url) and not has_userinfo("http://host/a@b")
    config = CaptureConfig("rtsp://10.0.0.5/x", credentials=("viewer", PASSWORD))
    assert "SECRET" not in repr(config) and "SECRET" not in config.spec.describe()
    with pytest.raises(ValueError, match="network URLs only"):
        CaptureConfig("clip.mp4", credentials=("a", "b"))
    with pytest.raises(ValueError, match="give it once"):
        CaptureConfig("rtsp://u:p@10.0.0.5/x", credentials=("a", "b"))


def test_environment_or_file_per_stream(tmp_path):
    assert env_name("back-yard") == "EDGE_ASSISTANT_SOURCE_CREDENTIALS_BACK_YARD"
    spec = StreamSpec("door", "rtsp://cam/x")
    assert stream_credentials(spec, {}) is None
    assert stream_credentials(spec, {env_name("door"): f"viewer:{PASSWORD}"}) == ("viewer", PASSWORD)
    with pytest.raises(ValueError, match="EDGE_ASSISTANT_SOURCE_CREDENTIALS_DOOR") as err:
        stream_credentials(spec, {env_name("door"): "SECRETONLY"})
    assert "SECRETONLY" not in str(err.value)
    with_file = StreamSpec("door", "rtsp://cam/x", credentials_file=str(cred_file(tmp_path, "a:b")))
    assert stream_credentials(with_file, {}) == ("a", "b")
    with pytest.raises(ValueError, match="give one"):
        stream_credentials(with_file, {env_name("door"): "a:b"})


def test_capture_logs_in_with_credentials_kept_apart(ts_bytes):
    with LoginTsServer(ts_bytes, [None], user="viewer", password=PASSWORD) as server:
        config = CaptureConfig(
            server.url, fps=2.0, clip_seconds=1.0, queue_size=50, credentials=("viewer", PASSWORD), reconnect=ONE_RETRY
        )
        capture = CaptureThread(config, threading.Event())
        out = drain(capture)
    assert server.logins >= 1 and out.clips
    assert capture.description == f"stream '{server.url}'"


def test_the_app_takes_logins_from_a_file_and_the_environment(ts_bytes, tmp_path):
    log = tmp_path / "events.jsonl"
    with (
        LoginTsServer(ts_bytes, [None], user="viewer", password=PASSWORD) as door,
        LoginTsServer(ts_bytes, [None], user="yard", password="SECRET2") as yard,
    ):
        config = tmp_path / "streams.toml"
        path = cred_file(tmp_path, f"viewer:{PASSWORD}\n")
        config.write_text(f'[streams.door]\nsource = "{door.url}"\ncredentials_file = "{path}"\n')
        done = run_app_here(
            "--config", str(config), "--stream", f"back-yard={yard.url}", "--model", "tiny", "--no-realtime",
            "--every", "2", "--budget", "256", "--window", "16", "--max-new-tokens", "4", "--fps", "2",
            "--clip-seconds", "1", "--max-rounds", "2", "--quiet", "--log-jsonl", str(log),
            env={"EDGE_ASSISTANT_SOURCE_CREDENTIALS_BACK_YARD": "yard:SECRET2"},
        )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    assert door.logins >= 1 and yard.logins >= 1
    events = read_log(log)
    assert {e.stream for e in of_type(events, "clip")} == {"door", "back-yard"}
    for text in (done.stdout, done.stderr, log.read_text()):
        assert "SECRET" not in text


def test_bad_credentials_settings_exit_2_without_the_secret(tmp_path, capsys, monkeypatch):
    loose = cred_file(tmp_path, "viewer:SECRETPW\n", 0o644)
    config = tmp_path / "streams.toml"
    config.write_text(f'[streams.door]\nsource = "rtsp://127.0.0.1:9/x"\ncredentials_file = "{loose}"\n')
    code, err = run_main(capsys, "--config", str(config), "--model", "tiny")
    assert code == 2 and "chmod 600" in err and "SECRETPW" not in err
    with monkeypatch.context() as env:
        env.setenv("EDGE_ASSISTANT_SOURCE_CREDENTIALS_DOOR", "a:b")
        code, err = run_main(capsys, "--stream", "door=rtsp://u:SECRETPW@127.0.0.1:9/x", "--model", "tiny")
    assert code == 2 and "give it once" in err and "SECRETPW" not in err
    code, err = run_main(capsys, "--stream", "door=rtsp://127.0.0.1:9/x", "--stream-credentials-file", f"gate={loose}")
    assert code == 2 and "no stream named 'gate'" in err


def test_credentials_file_flag_reaches_the_capture(tmp_path):
    path = cred_file(tmp_path, "viewer:pw\n")
    args = parse_args(["--stream", "door=rtsp://127.0.0.1:9/x", "--stream-credentials-file", f"door={path}"])
    config = AppConfig.from_args(args)
    assert config.streams[0].capture.credentials == ("viewer", "pw")
    assert config.streams[0].capture.source == "rtsp://127.0.0.1:9/x"
    assert os.environ.get(env_name("door")) is None
