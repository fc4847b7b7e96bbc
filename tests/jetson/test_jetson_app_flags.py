"""The command the Jetson service runs must be one `python -m app` accepts, for every board and mode."""

import shlex
from pathlib import Path

import pytest

from app.cli import parse_args
from app.config import AppConfig
from tests.jetson.test_jetson_deploy import BOARDS, run_deploy, unit_from


def _exec_start_args(unit: str) -> list[str]:
    line = next(line for line in unit.splitlines() if line.startswith("ExecStart="))
    words = shlex.split(line.removeprefix("ExecStart=").replace("%%", "%"))
    words = [w.replace("${LOGS_DIRECTORY}", "/var/log/edge-assistant") for w in words]
    assert words[1:3] == ["-m", "app"], words
    return words[3:]


@pytest.mark.parametrize("mode_args", [(), ("--mode", "terminal", "--source", "camera:0", "--every", "20")])
@pytest.mark.parametrize("board", list(BOARDS))
def test_service_command_is_valid_for_the_app(tmp_path: Path, board: str, mode_args: tuple[str, ...]) -> None:
    result = run_deploy(tmp_path, BOARDS[board], "--user", "root", *mode_args)
    assert result.returncode == 0, result.stderr
    args = _exec_start_args(unit_from(result.stdout))
    config = AppConfig.from_args(parse_args(args))  # raises (or exits 2) on any flag or value the app refuses
    assert config.model.device == "cuda"
    assert config.log_jsonl == Path("/var/log/edge-assistant/events.jsonl")
    assert (config.ui is None) == bool(mode_args)
    if mode_args:
        assert config.streams[0].capture.source == 0 and config.schedule.every_s == 20
