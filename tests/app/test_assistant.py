"""The assistant's threads in-process: faults inside a round, queued questions, stream switching."""

import threading

import pytest

from app.assistant import Assistant, RunLimits
from app.stream import Stream
from bus import EventBus
from cache.config import CacheConfig
from capture import CaptureConfig, SourceError
from model.session import SessionConfig, StreamingSession
from tests.support.app_helpers import video
from tests.support.session_helpers import loaded
from watches.scheduler import StandingQuestion


class Recorder:
    def __init__(self):
        self.events = []
        self.lock = threading.Lock()

    def __call__(self, event):
        with self.lock:
            self.events.append(event)

    def of(self, kind):
        with self.lock:
            return [e for e in self.events if e.TYPE == kind]


def _assistant(every=0.0, limits=None):
    session = StreamingSession(
        loaded("tiny-qwen2-vl"), CacheConfig(budget=192, window=8), SessionConfig(max_new_tokens=6)
    )
    bus, recorder = EventBus(), Recorder()
    bus.subscribe(recorder)
    assistant = Assistant([Stream("main", session, StandingQuestion(every_s=every))], bus, limits or RunLimits())
    return assistant, recorder


def _offline(path):
    return CaptureConfig(str(path), fps=1.0, clip_seconds=4.0, block_when_full=True, max_size=(64, 64))


def test_a_failing_round_is_an_error_event_and_the_stream_goes_on():
    assistant, recorder = _assistant(every=8.0)
    runner = assistant.default.session.runner
    real_decode = runner.decode_step
    calls = {"n": 0}

    def decode_fails_once(token):
        calls["n"] += 1
        if calls["n"] == 2:
            raise RuntimeError("simulated device error")
        return real_decode(token)

    runner.decode_step = decode_fails_once
    assistant.start()
    assistant.watch(_offline(video(40)))
    assert assistant.done.wait(120)
    assistant.stop()
    errors = recorder.of("error")
    assert len(errors) == 1 and errors[0].where == "answer" and "simulated device error" in errors[0].message
    answers = recorder.of("answer")
    assert [a.stream_time for a in answers] == [16.0, 24.0, 32.0, 40.0]  # round at 8 s failed, the rest ran
    assert answers[-1].stats.cache_tokens_end <= 192
    assert recorder.of("clip")[-1].stream_time == pytest.approx(40.0, abs=1)


def _wait_for(recorder, kind, count, seconds=60.0):
    for _ in range(int(seconds / 0.05)):
        if len(recorder.of(kind)) >= count:
            return
        threading.Event().wait(0.05)


def test_questions_wait_their_turn_and_keep_their_order():
    assistant, recorder = _assistant(limits=RunLimits(end_with_stream=False))
    assistant.start()
    asked = [f"question {i}?" for i in range(4)]
    for q in asked:  # back to back, while earlier answers are still being generated
        assistant.ask(q)
    together = [threading.Thread(target=assistant.ask, args=(f"tab {i}?",)) for i in range(2)]
    for t in together:  # two tabs at the same moment
        t.start()
    for t in together:
        t.join()
    _wait_for(recorder, "answer", len(asked) + 2)
    assistant.stop()
    questions = [a.question for a in recorder.of("answer")]
    assert questions[:4] == asked and sorted(questions[4:]) == ["tab 0?", "tab 1?"]
    # pieces of one answer are never interleaved with another's
    rounds = [e.round for e in recorder.events if e.TYPE in ("answer_start", "answer_piece", "answer")]
    assert rounds == sorted(rounds)


def test_bad_questions_and_sources_leave_the_state_alone(tmp_path):
    assistant, recorder = _assistant(limits=RunLimits(end_with_stream=False))
    assistant.start()
    assistant.watch(_offline(video(40)))
    _wait_for(recorder, "clip", 1)
    with pytest.raises(ValueError, match="question is empty"):
        assistant.ask("   ")
    with pytest.raises(SourceError):
        assistant.watch(CaptureConfig(str(tmp_path / "missing.mp4")))
    _wait_for(recorder, "end", 1)  # the stream keeps going after both
    assistant.stop()
    assert recorder.of("end") and recorder.of("clip")[-1].stream_time == pytest.approx(40.0, abs=1)
    assert not recorder.of("error")


def test_a_dropped_network_stream_is_reconnected_and_answers_go_on(tmp_path):
    from capture import ReconnectPolicy
    from capture.synth import write_video
    from tests.support.capture_helpers import TsServer

    source = tmp_path / "live.ts"
    write_video(source, size=(96, 64), fps=10, duration_s=24.0, options={"g": "10", "preset": "ultrafast"})
    data = source.read_bytes()
    assistant, recorder = _assistant(every=4.0)
    retry = ReconnectPolicy(initial_delay_s=0.05, max_delay_s=0.1, max_attempts=2)
    with TsServer(data, plan=[len(data) // 2, None]) as server:  # the connection is cut half way
        assistant.start()
        assistant.watch(
            CaptureConfig(server.url, fps=1.0, clip_seconds=2.0, queue_size=100, reconnect=retry, max_size=(64, 64))
        )
        assert assistant.done.wait(120)
        assistant.stop()
    kinds = [e.kind for e in recorder.of("capture")]
    assert kinds[:2] == ["reconnect", "reconnected"]  # dropped, reconnecting; then back: a kind of its own
    answers = recorder.of("answer")
    clips = recorder.of("clip")
    assert clips[-1].stream_time >= 20.0  # frames from after the cut arrived
    assert answers[-1].stream_time >= 20.0 and len(answers) >= 5  # and the rounds went on
    # the server finally answers 404: the capture gives up, which is reported, and the run ends cleanly
    assert recorder.of("error")[-1].where == "capture" and recorder.of("end")
