"""The host store's folder in the running assistant: a bad --store-dir stops the start with a clear message;
a folder that fails mid-run is an error event and the run goes on in RAM, answering every round."""

import shutil

from app.assistant import Assistant, RunLimits
from app.cli import main
from app.stream import Stream
from bus import EventBus
from cache.config import CacheConfig
from capture import CaptureConfig
from model.session import SessionConfig, StreamingSession
from tests.app.test_assistant import Recorder
from tests.support.app_helpers import video
from tests.support.session_helpers import loaded
from watches.scheduler import StandingQuestion


def test_a_missing_store_folder_exits_2_at_start_with_what_to_do(tmp_path, capsys):
    missing = tmp_path / "kv"
    args = ["--video", str(video(8)), "--model", "tiny", "--recall", "64", "--store-dir", str(missing)]
    assert main(args) == 2
    err = capsys.readouterr().err
    assert f"store folder {missing} does not exist" in err and "mkdir -p" in err


def test_a_store_folder_removed_mid_run_is_an_error_event_and_every_round_is_answered(tmp_path):
    folder = tmp_path / "kv"
    folder.mkdir()
    config = CacheConfig(budget=192, window=8, recall=64, block=16, store_bytes=2**26, store_dir=str(folder))
    session = StreamingSession(loaded("tiny-qwen2-vl"), config, SessionConfig(max_new_tokens=6))
    bus, recorder = EventBus(), Recorder()
    bus.subscribe(recorder)

    def remove_after_the_third_clip(event):  # runs in the model worker, between clips
        if event.TYPE == "clip" and event.index == 3:
            assert any(folder.glob("kv-store-*/*.pt"))
            shutil.rmtree(folder)

    bus.subscribe(remove_after_the_third_clip)
    assistant = Assistant([Stream("main", session, StandingQuestion(every_s=8.0))], bus, RunLimits())
    assistant.start()
    assistant.watch(CaptureConfig(str(video(40)), fps=1.0, clip_seconds=4.0, block_when_full=True, max_size=(64, 64)))
    assert assistant.done.wait(120)
    assistant.stop()
    errors = recorder.of("error")
    assert errors and all(e.where == "store" for e in errors)
    messages = [e.message for e in errors]
    assert sum("cannot write" in m and "RAM only" in m for m in messages) == 1
    assert sum("could not be read back" in m for m in messages) <= 1  # once, however many blocks it held
    answers = recorder.of("answer")
    assert [a.stream_time for a in answers] == [8.0, 16.0, 24.0, 32.0, 40.0]
    clips = recorder.of("clip")
    assert clips[-1].stats.store_tokens > clips[3].stats.store_tokens  # still filling, in RAM
    assert all(a.stats.cache_tokens_end <= 192 + 64 for a in answers)
    assert {c.stats.store_oldest_time for c in clips[:3]} == {0.0}  # on disk, from the stream's start
    assert clips[-1].stats.store_oldest_time == 12.0  # what was on disk is lost; RAM holds from clip 4 (12 s) on
