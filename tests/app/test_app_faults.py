"""Bad input and faults: exit code 2 with a clear message; Ctrl-C exits 0 with a complete log."""

import json
import os
import signal
import subprocess
import time

import pytest

from app.cli import main
from tests.support.app_helpers import REPO, app_command, of_type, read_log, video
from tests.support.in_process_main import run_main


@pytest.mark.parametrize(
    "args, message",
    [
        (["--video", "x.mp4", "--frobnicate"], "unrecognized arguments: --frobnicate"),
        (["--video", "x.mp4", "--every", "-5"], "--every must be from 0 to"),
        (["--video", "x.mp4", "--budget", "16", "--window", "32"], "must be larger than the window"),
        (["--video", "x.mp4", "--camera", "0"], "either --video or --camera, not both"),
        (["--video", "x.mp4", "--policy", "lru"], "invalid choice: 'lru'"),
        (["--model", "tiny"], "nothing to watch"),
        (["--video", "x.mp4", "--fps", "0"], "fps must be"),
        (["--video", "x.mp4", "--max-rounds", "-1"], "--max-rounds must be from 0 to"),
    ],
)
def test_bad_flags_exit_2_with_a_message(args, message, capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(args)
    assert exit_info.value.code == 2
    assert message in capsys.readouterr().err


def test_unopenable_sources_exit_2_naming_them(tmp_path, capsys):
    missing = tmp_path / "nope.mp4"
    assert main(["--video", str(missing), "--model", "tiny"]) == 2
    assert str(missing) in capsys.readouterr().err
    not_video = tmp_path / "notes.mp4"
    not_video.write_text("this is not a video")
    assert main(["--video", str(not_video), "--model", "tiny"]) == 2
    assert "notes.mp4" in capsys.readouterr().err
    assert main(["--camera", "97", "--model", "tiny"]) == 2
    assert "97" in capsys.readouterr().err


def test_unknown_model_exits_2_and_suggests_tiny(capsys):
    assert main(["--video", str(video(8)), "--model", "/no/such/model/dir"]) == 2
    err = capsys.readouterr().err
    assert "/no/such/model/dir" in err and "--model tiny" in err


def test_config_file_sets_options_and_flags_win(tmp_path, capsys):
    log = tmp_path / "cfg.jsonl"
    config = tmp_path / "run.toml"
    config.write_text(f'model = "tiny"\nevery = 4\nbudget = 128\nwindow = 8\nmax-rounds = 2\nlog-jsonl = "{log}"\n')
    code, err = run_main(
        capsys, "--config", str(config), "--video", str(video(60)), "--no-realtime", "--max-rounds", "1"
    )
    assert code == 0, err[-2000:]
    answers = of_type(read_log(log), "answer")
    assert [a.stream_time for a in answers] == [4.0]  # every=4 from the file, --max-rounds 1 from the flag
    bad = tmp_path / "bad.toml"
    bad.write_text("bugdet = 12\n")
    code, err = run_main(capsys, "--config", str(bad), "--video", str(video(8)))
    assert code == 2 and "unknown setting 'bugdet'" in err


def _ignore_sigint() -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # what a background job of a shell script inherits


STOPS = {  # the run's name: (the signal that stops it, whether SIGINT was ignored when it started)
    "ctrl-c": (signal.SIGINT, False),
    "ctrl-c-in-a-background-job": (signal.SIGINT, True),
    "sigterm-service-stop": (signal.SIGTERM, False),
}


@pytest.fixture(scope="module")
def stoppable_runs(tmp_path_factory):
    """The three runs, started at once so that their starts overlap; each test stops its own. Name: (process, its
    --log-jsonl, its stderr file)."""
    folder = tmp_path_factory.mktemp("stops")
    runs = {}
    for name, (_, sigint_ignored_at_start) in STOPS.items():
        log, err = folder / f"{name}.jsonl", folder / f"{name}.err"
        proc = subprocess.Popen(
            app_command(
                "--video",
                str(video(120)),
                "--model",
                "tiny",
                "--every",
                "2",
                "--budget",
                "128",
                "--window",
                "8",
                "--max-new-tokens",
                "4",
                "--log-jsonl",
                str(log),
            ),  # fmt: skip
            cwd=REPO,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=open(err, "w"),
            text=True,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
            preexec_fn=_ignore_sigint if sigint_ignored_at_start else None,
        )
        runs[name] = (proc, log, err)
    yield runs
    for proc, _, _ in runs.values():
        if proc.poll() is None:
            proc.kill()
            proc.wait()


@pytest.mark.parametrize("name", list(STOPS))
def test_a_stop_signal_mid_run_exits_0_with_a_complete_log(stoppable_runs, name):
    stop_signal, _ = STOPS[name]
    proc, log, err_path = stoppable_runs[name]
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:  # realtime pacing: wait until it is really running
        assert proc.poll() is None, err_path.read_text()[-2000:]
        if log.exists() and len(of_type(read_log(log), "answer")) >= 1:
            break
        time.sleep(0.2)
    else:
        pytest.fail("no answer within 120 s")
    proc.send_signal(stop_signal)
    assert proc.wait(30) == 0, err_path.read_text()[-2000:]
    err = err_path.read_text()
    lines = log.read_text().splitlines()
    events = [json.loads(line) for line in lines]  # every line is whole JSON
    assert events[-1]["type"] == "status" and events[-1]["message"] == "assistant stopped"
    assert events[-1]["kind"] == "stopped" and events[-1]["v"] == 1  # the kind says it, not the text
    assert "Traceback" not in err
    assert f"{signal.Signals(stop_signal).name}: stopping" in err
