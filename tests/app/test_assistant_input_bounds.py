"""People's input against the real assistant (tiny model, a real encoded video): a question too long is refused
before it is queued, pending questions are bounded, and a flood of questions never starves the video."""

import threading
import time

import pytest

from app.assistant import Assistant, RunLimits
from app.stream import Stream
from bus import EventBus
from bus.input_limits import AssistantBusy, InputLimits
from cache.config import CacheConfig
from capture import CaptureConfig
from model.session import SessionConfig, StreamingSession
from tests.app.test_assistant import Recorder, _wait_for
from tests.support.app_helpers import video
from tests.support.session_helpers import loaded
from watches.scheduler import StandingQuestion

MEGABYTE_QUESTION = "what is in the corner? " * 45_000  # ~1 MB


def _assistant(input_limits: InputLimits, limits: RunLimits | None = None):
    session = StreamingSession(
        loaded("tiny-qwen2-vl"), CacheConfig(budget=192, window=8), SessionConfig(max_new_tokens=4)
    )
    bus, recorder = EventBus(), Recorder()
    bus.subscribe(recorder)
    stream = Stream("main", session, StandingQuestion(every_s=0.0))
    assistant = Assistant([stream], bus, limits or RunLimits(), input_limits=input_limits)
    return assistant, recorder


def _offline(seconds: float) -> CaptureConfig:
    return CaptureConfig(str(video(seconds)), fps=1.0, clip_seconds=4.0, block_when_full=True, max_size=(64, 64))


def test_a_megabyte_question_is_refused_before_it_is_queued_and_the_assistant_goes_on():
    assistant, recorder = _assistant(InputLimits(max_question_chars=40))
    assistant.start()
    with pytest.raises(ValueError, match=r"too long \(1034999 characters; at most 40,") as refused:
        assistant.ask(MEGABYTE_QUESTION)
    assert not isinstance(refused.value, AssistantBusy)
    with pytest.raises(ValueError, match="too long"):
        assistant.ask("  " + "x" * 41 + "  ")
    assistant.ask("  " + "x" * 40 + "  ")  # blanks around it do not count
    assistant.ask("what is in the corner?")
    assistant.watch(_offline(16))  # the stream runs after the refusals (a whole 16-s file ingests in a second)
    assert assistant.done.wait(120)
    assistant.stop()
    asked = [e.question for e in recorder.of("answer_start")]
    assert asked == ["x" * 40, "what is in the corner?"]  # the long one never reached the model
    assert recorder.of("clip")[-1].stream_time == pytest.approx(16.0, abs=1) and not recorder.of("error")


def test_pending_questions_are_bounded_and_one_more_is_busy():
    assistant, recorder = _assistant(InputLimits(max_pending=3), RunLimits(end_with_stream=False))
    for i in range(3):  # the worker has not started: they all wait
        assistant.ask(f"question {i}?")
    with pytest.raises(AssistantBusy, match=r"busy: 3 questions are already waiting .* try again"):
        assistant.ask("one too many?")
    assistant.start()
    _wait_for(recorder, "answer", 3)
    assistant.ask("after the queue emptied?")  # room again once answers were given
    _wait_for(recorder, "answer", 4)
    assistant.stop()
    assert [a.question for a in recorder.of("answer")] == [
        "question 0?", "question 1?", "question 2?", "after the queue emptied?"
    ]  # fmt: skip


def test_a_flood_of_questions_never_starves_the_video():
    """A thread asks 10,000 questions as fast as it is told (busy ones dropped) while a 16 s file is watched
    offline: every clip is still ingested and the run ends with the file, having answered only a bounded few
    per clip. Before questions were bounded, the worker answered every queued question before the next clip."""
    assistant, recorder = _assistant(InputLimits(max_pending=8, per_clip=2))
    accepted, busy = [], 0
    stop = threading.Event()

    def flood():
        nonlocal busy
        for i in range(10_000):
            if stop.is_set() or assistant.done.is_set():
                return
            try:
                assistant.ask(f"flood {i}?")
                accepted.append(i)
            except AssistantBusy:
                busy += 1
            time.sleep(0.001)  # at most ~1000 questions a second: a fast typist's script, not a memory test

    flooder = threading.Thread(target=flood, name="flood")
    assistant.start()
    assistant.watch(_offline(16))
    flooder.start()
    ended = assistant.done.wait(150)
    stop.set()
    flooder.join(30)
    assistant.stop()
    clips = recorder.of("clip")
    assert ended, f"the run did not end: {len(clips)} clips, {len(recorder.of('answer'))} answers"
    assert [c.stream_time for c in clips] == [4.0 * k for k in range(1, 5)]
    assert busy > 0 and len(accepted) < 10_000
    answers = recorder.of("answer")
    assert answers and [a.question for a in answers] == [f"flood {i}?" for i in accepted[: len(answers)]]


def test_the_page_says_busy_and_too_long_from_the_real_assistant():
    from capture.options import CaptureOptions
    from ui.controls import Controls
    from ui.state import LiveState

    assistant, _ = _assistant(InputLimits(max_question_chars=100, max_pending=2), RunLimits(end_with_stream=False))
    live = LiveState()
    controls = Controls(assistant, live, CaptureOptions(max_size=(64, 64)), max_upload_bytes=2**20)
    long = controls.ask(MEGABYTE_QUESTION)
    assert not long.ok and "too long" in long.message and live.snapshot().turns == ()
    assert controls.ask("first?").ok and controls.ask("second?").ok  # the worker has not started: they wait
    busy = controls.ask("third?")
    assert not busy.ok and busy.message.startswith("busy: 2 questions are already waiting")
    turns = {t.question: t for t in live.snapshot().turns}
    assert turns["first?"].queued and turns["second?"].queued and turns["third?"].error.startswith("busy")
    assistant.start()
    assistant.stop()
