"""A stream added to a running assistant (`Assistant.add_stream`, what the page's "Add stream" calls): it is
watched and answered under its own name next to the running one; a taken or unsafe name, a missing file and
a stream that does not fit in memory are refused with what to do, and the running stream goes on untouched.
In the terminal, a typed `+NAME=SOURCE` line adds one."""

import contextlib
import io
import os
import threading
import time

import pytest

import app.stream_factory as stream_factory
from app.admission import AdmissionError
from app.assistant import Assistant, RunLimits
from app.cli import parse_args
from app.config import AppConfig
from app.front_door import capture_options
from app.stream_factory import FreeMemory, StreamFactory
from app.terminal import stream_adder, stream_remover
from bus import EventBus, StatusKind
from cache.config import CacheConfig
from capture import CaptureConfig, SourceError
from model.session import SessionConfig
from terminal.printer import TerminalPrinter
from terminal.stdin_questions import StdinQuestions
from tests.support.app_helpers import of_type, read_log, video
from tests.support.in_process_main import run_app_here
from tests.support.session_helpers import loaded
from tests.support.source_servers import FolderServer
from watches.spec import WatchSpec

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
            return [e for e in self.events if e.TYPE == kind and (stream == "*" or e.stream == stream)]

    def wait_for(self, kind, stream, count):
        """Blocks until `count` events of `kind` named `stream` arrived (a hang fails after HANG_S)."""
        with self.changed:
            arrived = self.changed.wait_for(
                lambda: sum(e.TYPE == kind and e.stream == stream for e in self.events) >= count, HANG_S
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
    assert [a.stream_time for a in answers[:2]] == [4.0, 8.0] and answers[0].question == "What now?"
    assert answers[0].stats.cache_tokens_end <= 192
    added = [e.message for e in recorder.of("status", "b")]
    assert added[0] == f"stream added; memory: {admission}" and added[1].startswith("watching file")
    assistant.ask("what is on screen?", stream="b")
    recorder.wait_for("answer", "b", 3)
    asked = [(a.stream, a.question) for a in recorder.of("answer") if a.question == "what is on screen?"]
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
    times = [c.stream_time for c in recorder.of("clip", "a")]
    assert times == sorted(times) and len(set(times)) == len(times)  # its stream went on, never restarted
    assert not recorder.of("error") and not [e for e in recorder.of("status") if "added" in e.message]


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
    with FolderServer(b.parent) as server:
        url = server.url(b.name)
        typed = (
            f"+B={url}\n+a={url}\n+c=/nonexistent/c.mp4\n+d=gst:v4l2src ! appsink\n+e=tcp://127.0.0.1:9?listen=1\n"
            f"+b={url}\nb: what is on screen?\n"
        )
        done = run_app_here(
            "--stream", f"a={video(24)}", "--model", "tiny", "--no-realtime", "--every", "8", "--budget", "256",
            "--window", "16", "--max-new-tokens", "8", "--quiet", "--log-jsonl", str(log),
            "--allow-source-net", "127.0.0.0/8", stdin=typed,
        )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    assert "cannot add the stream (type +NAME=SOURCE): bad stream name 'B'" in done.stderr
    assert "a stream named 'a' exists already" in done.stderr
    assert "local paths cannot be chosen while running" in done.stderr  # a typed file path: the page uploads
    assert "gst: pipelines cannot be chosen while running" in done.stderr
    assert "'tcp:' sources cannot be chosen while running" in done.stderr
    assert "stream b added; memory: 2 stream(s) x (" in done.stderr
    events = read_log(log)
    answers = [(a.stream, a.question) for a in of_type(events, "answer")]
    assert answers.count(("b", "what is on screen?")) == 1 and ("a", "what is on screen?") not in answers
    auto = [a.stream_time for a in of_type(events, "answer") if a.stream == "a" and a.auto]
    assert auto == [8.0, 16.0, 24.0]  # the run's standing question, at a's own stream time
    assert {e.stream for e in of_type(events, "end")} == {"a", "b"}  # b, served whole, ends too
    assert "[b]" in done.stdout  # several streams now: lines name their stream


def test_a_loopback_source_typed_in_the_terminal_is_refused_unless_its_network_is_allowed():
    class Assistant_:
        added: list = []

        def add_stream(self, name, capture):
            self.added.append((name, capture.source))
            return "fits"

    for flags, refused in (([], True), (["--allow-source-net", "127.0.0.0/8"], False)):
        config = AppConfig.from_args(parse_args(["--video", "a.mp4", *flags]))
        assistant = Assistant_()
        assistant.added = []
        add = stream_adder(assistant, capture_options(config, (64, 64)), TerminalPrinter())
        with contextlib.redirect_stderr(io.StringIO()) as err:
            name = add("cam=http://127.0.0.1:8080/admin")
        if refused:
            assert name is None and assistant.added == []
            assert "127.0.0.1 is a loopback address" in err.getvalue()
            assert "--allow-source-net 127.0.0.0/8" in err.getvalue()
        else:
            assert name == "cam" and assistant.added == [("cam", "http://127.0.0.1:8080/admin")]


def test_a_typed_minus_name_removes_that_stream():
    removed, asked = [], []

    def remove(name):
        removed.append(name)
        return name == "b"

    read, write = os.pipe()
    with os.fdopen(read) as stream, os.fdopen(write, "w") as typing:
        questions = StdinQuestions(
            lambda q, stream=None: asked.append((q, stream)), stream, 0.05, ["a", "b"], remove=remove
        )
        questions.start()
        typing.write("-b\n- zz \nb: still there?\nwhat now?\n")
        typing.flush()
        typing.close()
        deadline = time.monotonic() + HANG_S
        while len(asked) < 2 and time.monotonic() < deadline:
            time.sleep(0.05)
        questions.stop()
    assert removed == ["b", "zz"]
    assert asked == [("b: still there?", None), ("what now?", None)]  # b is no stream any more: asks every stream


def test_a_removal_typed_in_the_terminal_says_what_happened():
    class Assistant_:
        def remove_stream(self, name):
            if name != "b":
                raise ValueError(f"no stream named {name!r}; streams: a, b")

    remove = stream_remover(Assistant_())
    with contextlib.redirect_stderr(io.StringIO()) as err:
        assert remove("b") and not remove("c")
    assert "stream b removed" in err.getvalue()
    assert "cannot remove the stream (type -NAME): no stream named 'c'" in err.getvalue()


def test_junk_streams_can_be_removed_so_that_a_real_one_fits_again():
    factory = _factory()
    factory.max_streams = 4
    bus, recorder = EventBus(), Recorder()
    bus.subscribe(recorder)
    assistant = Assistant([factory.build("a")], bus, RunLimits(end_with_stream=False), factory=factory)
    assistant.start()
    try:
        assistant.watch(_looping(video(24)), stream="a")
        for junk in ("x", "y", "z"):  # three junk adds fill the cap
            assistant.add_stream(junk, _looping(video(24, size=(64, 48), fps=3.0)))
        recorder.wait_for("clip", "z", 1)
        with pytest.raises(AdmissionError, match="4 streams run already, the most --max-streams 4 allows; remove one"):
            assistant.add_stream("door", _looping(video(24)))
        captures = [assistant.streams[name].capture for name in ("x", "y", "z")]
        sessions = [assistant.streams[name].session for name in ("x", "y", "z")]
        for junk in ("x", "y", "z"):
            assistant.remove_stream(junk)
        assert list(assistant.streams) == ["a"]
        assert not any(capture.is_alive() for capture in captures)  # their capture threads were joined
        assert all(s.cache.get_seq_length() == 0 for s in sessions)  # their caches emptied, then dropped
        removed = [e for e in recorder.of("status") if e.kind is StatusKind.STREAM_REMOVED]
        assert [(e.stream, e.message) for e in removed] == [(n, "stream removed") for n in ("x", "y", "z")]
        seen = len(recorder.of("clip", "x"))
        assistant.add_stream("door", _looping(video(24, size=(64, 48), fps=3.0)))  # a real one fits again
        recorder.wait_for("answer", "door", 1)
        assert len(recorder.of("clip", "x")) == seen  # nothing more of a removed stream
        for bad, message in (("a", "is the first stream and cannot be removed"), ("x", "no stream named 'x'")):
            with pytest.raises(ValueError, match=message):
                assistant.remove_stream(bad)
        assert list(assistant.streams) == ["a", "door"] and not recorder.of("error")
    finally:
        assert assistant.stop(10.0)


def test_removing_a_stream_returns_its_memory_to_admission(monkeypatch):
    factory = _factory()
    bus, recorder = EventBus(), Recorder()
    bus.subscribe(recorder)
    assistant = Assistant([factory.build("a")], bus, RunLimits(end_with_stream=False), factory=factory)
    assistant.start()
    try:
        cost = factory.cost()
        free = int(2.5 * cost.device_bytes / 0.8)  # two streams' bound fit, not three
        monkeypatch.setattr(stream_factory, "free_memory", lambda device: FreeMemory(free, free, shared=True))
        assistant.add_stream("junk", _looping(video(24)))
        with pytest.raises(AdmissionError, match="one more stream does not fit in memory: 3 stream"):
            assistant.add_stream("door", _looping(video(24)))
        assistant.remove_stream("junk")
        assert assistant.add_stream("door", _looping(video(24))).startswith("2 stream(s) x (")
    finally:
        assert assistant.stop(10.0)


@pytest.mark.parametrize(("leave", "reason"), [("remove_stream", "stream removed"), ("stop_stream", "stream stopped")])
def test_a_removed_or_stopped_streams_open_alert_ends_once_with_its_reason(leave, reason):
    """A stream removed, or stopped (its capture closed, the stream kept), while its alert is on: no clip comes to
    end it, so the removal or the stop does, once, with its reason, and the assistant's own stop gives it no
    second end."""
    always = WatchSpec("always", "Is there anything?", threshold=0.0, on_after=1, every=2.0)
    cache = CacheConfig(budget=192, window=8)
    factory = StreamFactory(loaded("tiny-qwen2-vl"), cache, SessionConfig(max_new_tokens=6), "What now?", 0, [always])
    bus, recorder = EventBus(), Recorder()
    bus.subscribe(recorder)
    assistant = Assistant([factory.build("a")], bus, RunLimits(end_with_stream=False), factory=factory)
    assistant.start()
    try:
        assistant.add_stream("b", _looping(video(24)))
        recorder.wait_for("alert", "b", 1)  # its begin
        getattr(assistant, leave)("b")
        recorder.wait_for("alert", "b", 2)
    finally:
        assert assistant.stop(10.0)
    alerts = [(e.began, e.reason) for e in recorder.of("alert", "b")]
    assert alerts == [(True, alerts[0][1]), (False, reason)], alerts
