"""The options of issue 30 on the command line and in --config (bad values exit 2 naming what is allowed), and
the clip events of a run over a real H.264 fixed-camera video: what each clip brought and what it kept."""

import pytest

from app.__main__ import main
from tests.support.app_helpers import of_type, read_log, video
from tests.support.camera_clips import camera_video
from tests.support.in_process_main import run_app_here


@pytest.mark.parametrize(
    ("flags", "named"),
    [
        (["--change-threshold", "0"], "(0, 1]"),
        (["--change-threshold", "2"], "(0, 1]"),
        (["--keyframe-every", "0"], ">= 1"),
        (["--change-floor", "1.5"], "[0, 1]"),
        (["--change-floor", "-0.01"], "[0, 1]"),
    ],
)
def test_bad_values_exit_2_naming_what_is_allowed(capsys, flags, named):
    with pytest.raises(SystemExit) as exited:
        main(["--video", str(video(8)), "--model", "tiny", "--timeline", "", *flags])
    err = capsys.readouterr().err
    assert exited.value.code == 2 and named in err, err[-1500:]


@pytest.mark.parametrize(
    ("toml", "message"),
    [
        ("keyframe_every = 2.5\nchange_threshold = 0.1\n", "keyframe_every must be a whole number"),
        ("keyframe_every = 0\n", ">= 1"),
        ("change_threshold = 0\n", "(0, 1]"),
    ],
)
def test_bad_values_in_the_config_file_exit_2(tmp_path, capsys, toml, message):
    config = tmp_path / "run.toml"
    config.write_text(toml)
    with pytest.raises(SystemExit) as exited:
        main(["--video", str(video(8)), "--model", "tiny", "--timeline", "", "--config", str(config)])
    err = capsys.readouterr().err
    assert exited.value.code == 2 and message in err and "Traceback" not in err, err[-1500:]


def test_help_shows_the_options_and_their_defaults(capsys):
    with pytest.raises(SystemExit) as exited:
        main(["--help"])
    assert exited.value.code == 0
    out = capsys.readouterr().out
    for flag in ("--drop-unchanged", "--no-drop-unchanged", "--change-threshold", "--keyframe-every", "--change-floor"):
        assert flag in out


@pytest.fixture(scope="module")
def camera(tmp_path_factory):
    """A fixed camera's 24 s, an object crossing during seconds 12-20 (made once for both runs)."""
    path = tmp_path_factory.mktemp("camera") / "camera.mp4"
    camera_video(24, moving=(12, 20), path=path)
    return path


@pytest.mark.parametrize("drop", [True, False])
def test_clip_events_say_what_each_clip_brought_and_kept(tmp_path, camera, drop):
    log = tmp_path / "run.jsonl"
    config = tmp_path / "run.toml"
    config.write_text(f"drop_unchanged = {'true' if drop else 'false'}\nkeyframe_every = 4\n")
    done = run_app_here(
        "--video", str(camera), "--model", "tiny", "--no-realtime", "--every", "0", "--budget", "256",
        "--window", "8", "--max-new-tokens", "4", "--quiet", "--log-jsonl", str(log), "--config", str(config),
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    clips = of_type(read_log(log), "clip")
    assert len(clips) == 6
    assert all(c.stats.visual_tokens > 0 and 0 <= c.stats.visual_tokens_kept <= c.stats.visual_tokens for c in clips)
    if not drop:
        assert all(c.stats.keyframe and c.stats.visual_tokens_kept == c.stats.visual_tokens for c in clips)
        return
    assert [c.stats.keyframe for c in clips] == [True, False, False, False, True, False]
    assert clips[0].stats.visual_tokens_kept == clips[0].stats.visual_tokens
    assert clips[1].stats.visual_tokens_kept == 0 and clips[1].stats.visual_tokens_changed == 0  # static: nothing new
    assert clips[3].stats.visual_tokens_kept > 0  # the object crosses during seconds 12-20


def test_the_first_clip_after_a_capture_reconnect_enters_whole():
    import numpy as np

    from app.assistant import Assistant, RunLimits
    from app.stream import Stream
    from bus import EventBus
    from cache.config import CacheConfig
    from capture.types import CaptureStats, Clip
    from model.session import SessionConfig, StreamingSession
    from tests.support.model_fixtures import smooth_frame
    from tests.support.session_helpers import loaded
    from watches.scheduler import StandingQuestion

    session = StreamingSession(loaded("tiny-qwen2-vl"), CacheConfig(budget=512, window=8), SessionConfig())
    bus, events = EventBus(), []
    bus.subscribe(events.append)
    stream = Stream("main", session, StandingQuestion(every_s=0))
    assistant = Assistant([stream], bus, RunLimits())
    frames = np.repeat(smooth_frame(120, 160)[None], 4, axis=0)
    for index, reconnects in enumerate([0, 0, 0, 1, 1]):  # the capture reconnected before clip 3
        clip = Clip(frames, [4.0 * index + k for k in range(4)], 4.0 * index, 4.0 * index + 4, index,
                    CaptureStats(reconnects=reconnects))  # fmt: skip
        assistant._on_clip(stream, clip)
    clips = [e for e in events if e.TYPE == "clip"]
    assert [c.stats.keyframe for c in clips] == [True, False, False, True, False]
    assert [c.stats.visual_tokens_kept == c.stats.visual_tokens for c in clips] == [True, False, False, True, False]
