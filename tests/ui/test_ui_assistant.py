"""The page's state and commands wired to the real assistant and the tiny model, without a browser:
a live (real-time) file, the standing question, a typed question, a bad source while the stream runs."""

import socket
import time

import pytest

from app.assistant import Assistant, RunLimits
from app.stream import Stream
from bus import EventBus
from cache.attention import register_attention
from cache.config import CacheConfig
from capture.options import CaptureOptions
from capture.synth import write_video
from model.config import ModelConfig
from model.loading import load_model
from model.session import SessionConfig, StreamingSession
from ui.controls import Controls
from ui.state import LiveState, MemoryPoint
from watches.scheduler import StandingQuestion


def wait_for(condition, timeout=20.0, what="condition"):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return
        time.sleep(0.05)
    raise AssertionError(f"timed out after {timeout:g} s waiting for {what}")


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def page_backend(tmp_path):
    video = tmp_path / "live.mp4"
    write_video(video, size=(160, 120), fps=10, duration_s=8.0, options={"preset": "ultrafast"})
    loaded = load_model(ModelConfig("tiny"), text_attention=register_attention())
    session = StreamingSession(loaded, CacheConfig(budget=160, window=16), SessionConfig(max_new_tokens=16))
    bus = EventBus()
    live = LiveState(memory_sample=lambda: MemoryPoint(123 * 2**20, "process memory (CPU)", "cpu"), budget=160)
    bus.subscribe(live)
    schedule = StandingQuestion("What is happening now?", every_s=2)
    assistant = Assistant([Stream("main", session, schedule)], bus, RunLimits(0, 0, False))
    options = CaptureOptions(fps=2, clip_seconds=1, realtime=True, max_size=loaded.adapter.frame_size())
    controls = Controls(assistant, live, options, max_upload_bytes=2**20)
    assistant.start()
    yield video, live, controls
    assert assistant.stop(10.0)


def test_the_page_backend_streams_answers_and_survives_a_bad_source(page_backend):
    video, live, controls = page_backend
    assert controls.start("path or URL", None, str(video), 0).ok
    wait_for(lambda: live.snapshot().clips >= 1, what="the first clip")
    assert live.snapshot().preview is not None and live.snapshot().source == f"file '{video}'"

    feedback = controls.start("path or URL", None, f"http://127.0.0.1:{closed_port()}/missing.mp4", 0)
    assert not feedback.ok and "cannot watch it" in feedback.message
    clips = live.snapshot().clips
    wait_for(lambda: live.snapshot().clips > clips, what="clips after the refused source")
    assert live.snapshot().source == f"file '{video}'"

    assert controls.ask("What colour is the square?").ok
    wait_for(
        lambda: (
            any(t.done and not t.auto for t in live.snapshot().turns)
            and any(t.done and t.auto for t in live.snapshot().turns)
        ),
        what="a typed and an automatic answer",
    )
    wait_for(
        lambda: any(p.tokens_seen > p.cache_tokens for p in live.snapshot().points),
        what="the cache to reach its budget and evict",
    )
    snap = live.snapshot()
    assert all(p.cache_tokens <= 160 for p in snap.points)  # the budget holds across clips and answers
    typed = next(t for t in snap.turns if not t.auto)
    assert typed.question == "What colour is the square?" and typed.round >= 1
    assert typed.stats is not None and typed.stats.ttft_s > 0 and typed.stats.cache_tokens_before > 0
    assert any(line.kind == "error" and "cannot watch it" in line.message for line in snap.log)
