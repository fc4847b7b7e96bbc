"""serve(): bad input is a message and exit code 2, never a traceback; --fps etc. reach sources picked in the page."""

import dataclasses
import socket

import pytest

from app.cli import parse_args
from app.config import AppConfig
from app.startup import EXIT_BAD_INPUT
from app.web import capture_options, serve
from capture.options import CaptureOptions


def config_from(argv: list[str]) -> AppConfig:
    return AppConfig.from_args(parse_args(argv))


def test_an_unloadable_model_exits_2_with_a_message(tmp_path, capsys):
    config = config_from(["--ui", "--model", str(tmp_path / "no-such-model"), "--port", "7999"])
    assert serve(config) == EXIT_BAD_INPUT
    err = capsys.readouterr().err
    assert "error:" in err and "Traceback" not in err


def test_an_unopenable_video_exits_2_before_the_model_loads(tmp_path, capsys):
    config = config_from(["--ui", "--model", "tiny", "--video", str(tmp_path / "missing.mp4")])
    assert serve(config) == EXIT_BAD_INPUT
    err = capsys.readouterr().err
    assert "error:" in err and "missing.mp4" in err and "loading" not in err


def test_a_busy_port_exits_2_and_stops_the_assistant(capsys):
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        config = config_from(["--ui", "--model", "tiny", "--port", str(port)])
        assert serve(config) == EXIT_BAD_INPUT
    assert f"cannot serve the page on 127.0.0.1:{port}" in capsys.readouterr().err


@pytest.mark.parametrize(
    "argv, expected",
    [
        ([], CaptureOptions(fps=1.0, clip_seconds=4.0, realtime=True, loop=False, max_size=(64, 64))),
        (
            ["--fps", "2", "--clip-seconds", "3", "--no-realtime", "--loop"],
            CaptureOptions(fps=2.0, clip_seconds=3.0, realtime=False, loop=True, max_size=(64, 64)),
        ),
    ],
)
def test_capture_flags_apply_to_sources_picked_in_the_page(argv, expected):
    options = capture_options(config_from(["--ui", *argv]), (64, 64))
    assert dataclasses.replace(options, policy=None) == expected
    assert options.policy is not None and options.policy.upload_dirs  # the page's picks follow the source policy
