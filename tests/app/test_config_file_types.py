"""A --config TOML file with a value of the wrong type: a clear message naming the setting and exit 2, never a
traceback, and nothing loaded."""

import pytest

from app.cli import main
from tests.support.app_helpers import video

CASES = [
    ('budget = "big"', "budget must be a whole number (e.g. budget = 2048), got 'big' (a string)"),
    ("budget = 1.5", "budget must be a whole number"),
    ("every = [1]", "every must be a number (e.g. every = 1.5), got [1] (a list)"),
    ("fps = true", "fps must be a number"),
    ("fps = nan", "fps must be a number"),
    ('quiet = "yes"', "quiet must be true or false, got 'yes' (a string)"),
    ("model = 3", "model must be a string"),
    ('question = ["what?"]', "question must be a string"),
    ("log_jsonl = 5", "log_jsonl must be a path"),
    ('policy = "lru"', "policy must be one of inf-mllm, snapkv"),
    ('stream = "a=b.mp4"', 'stream must be a list, e.g. stream = ["..."]'),
    ("alert = [1]", "every item of alert must be a string, got 1 (a whole number)"),
    ('max_question_chars = "lots"', "max_question_chars must be a whole number"),
    ("[streams.x]\nsource = 3.5", "stream 'x': the source must be a path, a URL or a camera index >= 0, got 3.5"),
    ("[streams.x]\nsource = true", "stream 'x': the source must be a path, a URL or a camera index >= 0"),
    ("[streams.x]\nsource = [1]", "stream 'x': the source must be a path, a URL or a camera index >= 0"),
    ('[streams.x]\nsource = "a.mp4"\nevery = true', "stream 'x': every must be a number of seconds >= 0"),
    ('[alerts.y]\nquestion = "is the door open?"\nthreshold = "high"', "alert 'y': threshold must be between 0 and 1"),
    ('[alerts.y]\nquestion = "is the door open?"\non_after = 1.5', "alert 'y': on_after must be a whole number"),
    ("[alerts.y]\nquestion = 7", "alert 'y': the question must be a non-empty string"),
]


@pytest.mark.parametrize(("body", "message"), CASES, ids=[c[0].replace("\n", " ") for c in CASES])
def test_a_wrong_type_in_the_config_file_exits_2_naming_it(tmp_path, capsys, body, message):
    config = tmp_path / "assistant.toml"
    config.write_text(body + "\n", encoding="utf-8")
    with pytest.raises(SystemExit) as exited:
        main(
            ["--config", str(config), "--video", str(video(8)), "--model", str(tmp_path / "no-model"), "--timeline", ""]
        )
    assert exited.value.code == 2
    err = capsys.readouterr().err
    assert message in err, err
    assert "Traceback" not in err and "loading" not in err


def test_right_types_still_load(tmp_path):
    from app.cli import parse_args

    config = tmp_path / "assistant.toml"
    config.write_text(
        'budget = 512\nfps = 2\nquiet = true\nlog_jsonl = "/tmp/x.jsonl"\nstream = ["door=a.mp4"]\n'
        "max_question_chars = 300\n[streams.yard]\nsource = 0\nevery = 10\n",
        encoding="utf-8",
    )
    args = parse_args(["--config", str(config)])
    assert (args.budget, args.fps, args.quiet, str(args.log_jsonl)) == (512, 2.0, True, "/tmp/x.jsonl")
    assert args.stream == ["door=a.mp4"] and args.max_question_chars == 300
    assert args.stream_tables == {"yard": {"source": 0, "every": 10}}
    assert isinstance(args.fps, float)
