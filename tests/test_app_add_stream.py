"""A stream added to a running assistant (`Assistant.add_stream`, what the page's "Add stream" calls): it is
watched and answered under its own name next to the running one; a taken or unsafe name, a missing file and
a stream that does not fit in memory are refused with what to do, and the running stream goes on untouched.
In the terminal, a typed `+NAME=SOURCE` line adds one."""

import threading

import pytest

import app.stream_factory as stream_factory
from app.admission import AdmissionError
from app.assistant import Assistant, RunLimits
from app.events import EventBus
from app.stream_factory import FreeMemory, StreamFactory
from app.watches.spec import WatchSpec
from cache.config import CacheConfig
from capture import CaptureConfig, SourceError
from model.session import SessionConfig
from tests.app_helpers import of_type, read_log, run_app, video
from tests.session_helpers import loaded

HANG_S = 300  # a guard against a hang, not a time the test expects
WATCHES = [WatchSpec("anyone", "Is anyone there?"), WatchSpec("door_open", "Is the door open?", streams=("a",))]


class Recorder:
    def __init__(self):
        self.events = []
        self.lock = threading.Lock()
        self.changed = threading.Condition(self.lock)

    def __call__(self, event):
        with self.changed:
            self.events.append(event)
            self.changed.notify_all()

    def of(self, kind, stream="*"):
        with self.lock:
            return [e for e in self.events if e["type"] == kind and (stream == "*" or e.get("stream") == stream)]

    def wait_for(self, kind, stream, count):
        """Blocks until `count` events of `kind` named `stream` arrived (a hang fails after HANG_S)."""
        with self.changed:
            arrived = self.changed.wait_for(
                lambda: sum(e["type"] == kind and e.get("stream") == stream for e in self.events) >= count, HANG_S
            )
        assert arrived, f"no {count} {kind} events of stream {stream!r}"


def _factory():
    cache = CacheConfig(budget=192, window=8)
    return StreamFactory(loaded("tiny-qwen2-vl"), cache, SessionConfig(max_new_tokens=6), "What now?", 4.0, WATCHES)


def _looping(path):
    return CaptureConfig(str(path), fps=1.0, clip_seconds=2.0, block_when_full=True, loop=True, max_size=(64, 64))


@pytest.fixture
def running():
    factory = _factory()
    bus, recorder = EventBus(), Recorder()
    bus.subscribe(recorder)
    assistant = Assistant([factory.build("a")], bus, RunLimits(end_with_stream=False), factory=factory)
    assistant.start()
    assistant.watch(_looping(video(24)), stream="a")
    yield assistant, recorder
    assert assistant.stop(10.0)


def test_an_added_stream_is_watched_and_answered_under_its_name(running):
    assistant, recorder = running
    recorder.wait_for("answer", "a", 1)
    admission = assistant.add_stream("b", _looping(video(24, size=(64, 48), fps=3.0)))
    assert admission.startswith("2 stream(s) x (") and "free" in admission
    assert list(assistant.streams) == ["a", "b"]
    recorder.wait_for("answer", "b", 2)  # the run's standing question, every 4 s of b's own stream time
    answers = recorder.of("answer", "b")
    assert [a["stream_time"] for a in answers[:2]] == [4.0, 8.0] and answers[0]["question"] == "What now?"
    assert answers[0]["cache_tokens_end"] <= 192
    added = [e["message"] for e in recorder.of("status", "b")]
    assert added[0] == f"stream added; memory: {admission}" and added[1].startswith("watching file")
    assistant.ask("what is on screen?", stream="b")
    recorder.wait_for("answer", "b", 3)
    asked = [(a["stream"], a["question"]) for a in recorder.of("answer") if a["question"] == "what is on screen?"]
    assert asked == [("b", "what is on screen?")]
    # the new stream has the watches of every stream, not the ones that name other streams
    assert [w.spec.name for w in assistant.streams["b"].watches] == ["anyone"]
    assert [w.spec.name for w in assistant.streams["a"].watches] == ["anyone", "door_open"]
    recorder.wait_for("check", "b", 1)
    assert not recorder.of("error")


@pytest.mark.parametrize(
    ("name", "source", "error", "message"),
    [
        ("a", None, ValueError, "a stream named 'a' exists already"),
        ("../etc", None, ValueError, "bad stream name '../etc': use lowercase letters"),
        ("Door", None, ValueError, "bad stream name 'Door'"),
        ("", None, ValueError, "bad stream name ''"),
        ("c", "missing.mp4", SourceError, "missing.mp4"),
    ],
)
def test_a_bad_stream_is_refused_and_the_running_one_goes_on(running, tmp_path, name, source, error, message):
    assistant, recorder = running
    recorder.wait_for("clip", "a", 2)
    stream = assistant.streams["a"]
    before = (stream.session, stream.capture, stream.schedule)
    config = _looping(tmp_path / source if source else video(24))
    with pytest.raises(error, match=message.replace(".", r"\.").replace("(", r"\(")):
        assistant.add_stream(name, config)
    assert list(assistant.streams) == ["a"] and (stream.session, stream.capture, stream.schedule) == before
    clips = len(recorder.of("clip", "a"))
    answers = len(recorder.of("answer", "a"))
    recorder.wait_for("clip", "a", clips + 2)
    recorder.wait_for("answer", "a", answers + 1)
    times = [c["stream_time"] for c in recorder.of("clip", "a")]
    assert times == sorted(times) and len(set(times)) == len(times)  # its stream went on, never restarted
    assert not recorder.of("error") and not [e for e in recorder.of("status") if "added" in e["message"]]


def test_a_stream_that_does_not_fit_is_refused_with_the_arithmetic(running, monkeypatch):
    assistant, recorder = running
    recorder.wait_for("answer", "a", 1)
    cost = assistant._factory.cost()
    # room for one stream's bound (in 80 % of what is free), not for two
    free = int(1.5 * cost.device_bytes / 0.8)
    monkeypatch.setattr(stream_factory, "free_memory", lambda device: FreeMemory(free, free, shared=True))
    assert assistant._factory.admit(1).startswith("1 stream(s) x (")
    with pytest.raises(AdmissionError) as refused:
        assistant.add_stream("b", _looping(video(24)))
    message = str(refused.value)
    assert message.startswith("one more stream does not fit in memory: 2 stream(s) x (")
    assert f"{cost.device_tokens} tokens x" in message and "more than 80% of the" in message
    assert message.endswith("lower --budget, --recall or --store-mb, or watch fewer streams")
    assert list(assistant.streams) == ["a"]
    answers = len(recorder.of("answer", "a"))
    recorder.wait_for("answer", "a", answers + 1)  # the running stream goes on
    assert not recorder.of("status", "b") and not recorder.of("error")


def test_an_assistant_without_a_factory_or_stopped_refuses_to_add(running):
    assistant, _ = running
    bare = Assistant([_factory().build("a")], EventBus(), RunLimits(end_with_stream=False))
    with pytest.raises(ValueError, match="cannot add streams"):
        bare.add_stream("b", _looping(video(24)))
    assert assistant.stop(10.0)
    with pytest.raises(ValueError, match="the assistant has stopped"):
        assistant.add_stream("b", _looping(video(24)))
    assert list(assistant.streams) == ["a"]


def test_a_stream_typed_as_plus_name_equals_source_in_the_terminal_is_added_and_answered(tmp_path):
    log = tmp_path / "typed.jsonl"
    b = video(24, size=(64, 48), fps=3.0)
    typed = f"+B={b}\n+a={b}\n+c=/nonexistent/c.mp4\n+b={b}\nb: what is on screen?\n"
    done = run_app(
        "--stream", f"a={video(24)}", "--model", "tiny", "--no-realtime", "--every", "8", "--budget", "256",
        "--window", "16", "--max-new-tokens", "8", "--quiet", "--log-jsonl", str(log), stdin=typed,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    assert "cannot add the stream (type +NAME=SOURCE): bad stream name 'B'" in done.stderr
    assert "a stream named 'a' exists already" in done.stderr and "/nonexistent/c.mp4" in done.stderr
    assert "stream b added; memory: 2 stream(s) x (" in done.stderr
    events = read_log(log)
    answers = [(a["stream"], a["question"]) for a in of_type(events, "answer")]
    assert answers.count(("b", "what is on screen?")) == 1 and ("a", "what is on screen?") not in answers
    for name in ("a", "b"):  # the run's standing question on both, each at its own stream time
        auto = [a["stream_time"] for a in of_type(events, "answer") if a["stream"] == name and a["auto"]]
        assert auto == [8.0, 16.0, 24.0]
    assert {e["stream"] for e in of_type(events, "end")} == {"a", "b"}
    assert "[b]" in done.stdout  # several streams now: lines name their stream
