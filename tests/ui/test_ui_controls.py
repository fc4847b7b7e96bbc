"""The page's commands against a stand-in assistant: what is sent, what the person reads, what stays untouched."""

import threading

import pytest

from bus.input_limits import AssistantBusy, InputLimits
from capture import CaptureConfig, SourceError
from capture.options import CaptureOptions
from ui.controls import Controls, check_upload, parse_camera
from ui.state import LiveState
from watches.scheduler import StandingQuestion


class FakeAssistant:
    def __init__(self, watch_error: Exception | None = None) -> None:
        self.schedule = StandingQuestion("What now?", every_s=30)
        self.limits = InputLimits(max_question_chars=100, max_pending=3)
        self.commands: list[tuple[str, object]] = []
        self.watch_error = watch_error
        self.stream_time = 0.0
        self._lock = threading.Lock()

    def watch(self, capture_config: CaptureConfig, stream=None) -> None:
        if self.watch_error is not None:
            raise self.watch_error
        self.commands.append(("watch", capture_config))

    def check_question(self, question: str) -> str:
        return self.limits.check(question)

    def ask(self, question: str, stream=None) -> None:
        question = self.check_question(question)
        with self._lock:
            if sum(name == "ask" for name, _ in self.commands) >= self.limits.max_pending:
                raise self.limits.busy()
            self.commands.append(("ask", question))

    def stop_stream(self, stream=None) -> None:
        self.commands.append(("stop_stream", None))

    def reset(self, stream=None) -> None:
        self.commands.append(("reset", None))


def make(watch_error=None, max_upload_bytes=1000, max_pending=3):
    assistant = FakeAssistant(watch_error)
    assistant.limits = InputLimits(max_question_chars=100, max_pending=max_pending)
    live = LiveState()
    options = CaptureOptions(fps=2.0, clip_seconds=3.0, realtime=True, max_size=(448, 448))
    return assistant, live, Controls(assistant, live, options, max_upload_bytes=max_upload_bytes)


def test_start_watches_the_path_with_the_page_capture_options_and_restarts_the_standing_clock():
    assistant, live, controls = make()
    assistant.schedule.update(every_s=30, now_s=90.0)  # the previous source was at t = 90 s
    feedback = controls.start("path or URL", None, "  rtsp://cam.local/stream  ", 0)
    assert feedback.ok
    ((name, config),) = assistant.commands
    assert name == "watch" and config.source == "rtsp://cam.local/stream" and config.spec.kind == "url"
    assert (config.fps, config.clip_seconds, config.realtime, config.max_size) == (2.0, 3.0, True, (448, 448))
    assert assistant.schedule.next_due_s == 30.0


def test_start_a_camera_by_index_and_refuse_bad_indexes():
    assistant, _, controls = make()
    assert controls.start("camera", None, "", 2.0).ok
    assert assistant.commands[0][1].source == 2 and assistant.commands[0][1].spec.kind == "camera"
    for bad in (-1, 1.5, None, "x"):
        feedback = controls.start("camera", None, "", bad)
        assert not feedback.ok and "camera index" in feedback.message
    assert len(assistant.commands) == 1
    assert parse_camera("3") == 3


@pytest.mark.parametrize(
    "location, expected",
    [
        ("", "type a video path or a stream URL"),
        ("ftp://host/video.mp4", "unsupported URL scheme"),
    ],
)
def test_bad_locations_become_messages_and_nothing_is_sent(location, expected):
    assistant, live, controls = make()
    feedback = controls.start("path or URL", None, location, 0)
    assert not feedback.ok and expected in feedback.message
    assert assistant.commands == []
    assert live.snapshot().log[-1].kind == "error" and expected in live.snapshot().log[-1].message


def test_an_unopenable_source_is_a_message_and_the_current_stream_is_kept():
    assistant, live, controls = make(watch_error=SourceError("cannot open stream 'http://127.0.0.1:9/x.mp4': refused"))
    assistant.schedule.update(every_s=30, now_s=40.0)
    feedback = controls.start("path or URL", None, "http://127.0.0.1:9/x.mp4", 0)
    assert not feedback.ok and feedback.message.startswith("cannot watch it: cannot open stream")
    assert assistant.commands == [] and assistant.schedule.next_due_s == 70.0  # schedule untouched


def test_uploads_are_checked_for_presence_type_and_size(tmp_path):
    good = tmp_path / "clip.mp4"
    good.write_bytes(b"x" * 100)
    big = tmp_path / "big.MKV"
    big.write_bytes(b"x" * 2000)
    text = tmp_path / "notes.txt"
    text.write_text("hello")
    assert check_upload(str(good), 1000) is None
    assert "limit" in check_upload(str(big), 1000)
    assert "not a video file" in check_upload(str(text), 1000)
    assert "no file uploaded" in check_upload(None, 1000)
    assert "cannot be read" in check_upload(str(tmp_path / "gone.mp4"), 1000)

    assistant, _, controls = make(max_upload_bytes=1000)
    assert not controls.start("file upload", str(text), "", 0).ok
    assert controls.start("file upload", str(good), "", 0).ok
    assert [c[1].source for c in assistant.commands] == [str(good)]


def test_questions_are_queued_in_the_chat_and_sent_empty_ones_are_refused():
    assistant, live, controls = make()
    assert not controls.ask("   ").ok
    assert assistant.commands == [] and live.snapshot().turns == ()
    assert controls.ask("  what colour is the car? ").ok
    assert assistant.commands == [("ask", "what colour is the car?")]
    (turn,) = live.snapshot().turns
    assert turn.question == "what colour is the car?" and turn.queued and not turn.auto


def test_a_too_long_question_is_refused_before_it_reaches_the_chat_or_the_assistant():
    assistant, live, controls = make()
    feedback = controls.ask("why? " * 200_000)  # 1 MB
    assert not feedback.ok and "too long" in feedback.message
    assert "at most 100" in feedback.message and "--max-question-chars" in feedback.message
    assert assistant.commands == [] and live.snapshot().turns == ()
    assert controls.ask("x" * 100).ok  # the limit itself is allowed


def test_a_busy_assistant_refuses_the_question_and_says_to_try_again():
    assistant, live, controls = make()
    assert all(controls.ask(f"question {i}").ok for i in range(3))
    feedback = controls.ask("one too many")
    assert not feedback.ok and feedback.message.startswith("busy") and "try again" in feedback.message
    assert isinstance(assistant.limits.busy(), AssistantBusy)
    refused = [t for t in live.snapshot().turns if t.question == "one too many"]
    assert len(refused) == 1 and not refused[0].queued and refused[0].error.startswith("busy")
    assert [q for _, q in assistant.commands] == ["question 0", "question 1", "question 2"]


def test_questions_from_many_tabs_at_once_reach_the_assistant_in_chat_order():
    assistant, live, controls = make(max_pending=1000)
    barrier = threading.Barrier(8)

    def tab(i):
        barrier.wait()
        for j in range(20):
            assert controls.ask(f"tab {i} question {j}").ok

    threads = [threading.Thread(target=tab, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(10)
    sent = [q for name, q in assistant.commands if name == "ask"]
    assert len(sent) == 160
    assert sent == [t.question for t in live.snapshot().turns]


def test_the_standing_question_is_edited_from_the_current_stream_time():
    assistant, _, controls = make()
    assistant.stream_time = 42.0
    feedback = controls.set_standing("  Is anyone at the door? ", 10)
    assert feedback.ok and "next at t = 52 s" in feedback.message
    assert (assistant.schedule.question, assistant.schedule.every_s) == ("Is anyone at the door?", 10.0)
    assert controls.set_standing("q", 0).ok and assistant.schedule.every_s == 0
    for question, every, expected in [("", 5, "must not be empty"), ("q", -1, "every must be >= 0"), ("q", None, "")]:
        feedback = controls.set_standing(question, every)
        assert not feedback.ok and expected in feedback.message
    assert (assistant.schedule.question, assistant.schedule.every_s) == ("q", 0)  # refused edits change nothing
    feedback = controls.set_standing("is it on? " * 100_000, 10)
    assert not feedback.ok and "too long" in feedback.message
    assert (assistant.schedule.question, assistant.schedule.every_s) == ("q", 0)


def test_stop_and_reset_are_sent():
    assistant, _, controls = make()
    assert controls.stop().ok and controls.reset().ok
    assert [name for name, _ in assistant.commands] == ["stop_stream", "reset"]
