"""Absurd sizes on the command line are refused before the model loads, saying the allowed range."""

import pytest

from app.cli import main
from tests.support.app_helpers import video
from tests.support.in_process_main import run_main

CASES = [
    (["--budget", "1000000000000"], "--budget must be from 2 to 1,048,576 tokens, got 1000000000000"),
    (["--store-mb", "1e12"], "--store-mb must be from 0 to 1,048,576 MiB"),
    (["--store-mb", "nan"], "--store-mb must be from 0 to 1,048,576 MiB"),
    (["--max-new-tokens", "1000000000"], "--max-new-tokens must be from 1 to 32,768 tokens"),
    (["--clip-seconds", "1e9"], "--clip-seconds must be from 0.01 to 600 seconds"),
    (["--fps", "1000"], "--fps must be from 0.001 to 240 frames per second"),
    (["--fps", "240", "--clip-seconds", "100"], "--fps x --clip-seconds must be at most 1024 frames per clip"),
    (["--recall", "1000000000000"], "--recall must be from 0 to 1,048,576 tokens"),
    (["--chunk-size", "1000000000"], "--chunk-size must be from 1 to 65,536 tokens"),
    (["--duration", "nan"], "--duration must be from 0 to"),
    (["--bias", "inf"], "--bias must be from 0 to 1,000,000"),
    (["--timeline-mb", "1e15"], "--timeline-mb must be from 1 to 1,048,576 MiB"),
    (["--max-upload-mb", "100000000000"], "--max-upload-mb must be from 1 to 1,048,576 MiB"),
    (["--max-question-chars", "0"], "max_question_chars must be a whole number from 1 to 100000"),
    (["--max-pending-questions", "100000000"], "max_pending must be a whole number from 1 to 10000"),
]


@pytest.mark.parametrize(("flags", "message"), CASES, ids=[" ".join(c[0]) for c in CASES])
def test_absurd_sizes_exit_2_with_the_range_before_anything_loads(tmp_path, capsys, flags, message):
    no_model = tmp_path / "no-model"  # loading it would fail: the error must be about the size instead
    with pytest.raises(SystemExit) as exited:
        main(["--video", str(video(8)), "--model", str(no_model), "--timeline", "", *flags])
    assert exited.value.code == 2
    err = capsys.readouterr().err
    assert message in err, err
    assert "loading" not in err and "no-model" not in err and "Traceback" not in err


def test_an_absurd_budget_in_the_config_file_is_refused_the_same_way(tmp_path, capsys):
    config = tmp_path / "assistant.toml"
    config.write_text("budget = 1000000000000\n", encoding="utf-8")
    code, err = run_main(
        capsys, "--config", str(config), "--video", str(video(8)), "--model", str(tmp_path / "no-model")
    )
    assert code == 2
    assert "--budget must be from 2 to 1,048,576 tokens, got 1000000000000" in err
    assert "loading" not in err and "Traceback" not in err
