"""RTSP for real: GStreamer's RTSP server (tests/support/rtsp_server.py) on 127.0.0.1 serves an H.264 video;
CaptureThreads read one or several streams at once, and a server killed and restarted on the same port
mid-stream is reconnected to while the other streams go on undisturbed.

Needs Debian's GStreamer RTSP server (see ``RTSP_PACKAGES``): skipped without it, failed without it
when EDGE_ASSISTANT_REQUIRE_TOOLS=1 (CI).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from capture import CaptureConfig, CaptureEvent, CaptureThread, Clip, EndOfStream, ReconnectPolicy, SourceError
from capture.synth import read_marker
from tests.support.capture_helpers import Media
from tests.support.rtsp_server import RtspServer, require_rtsp_server

SOURCE_FPS = 25  # frame rate of the served video; FFmpeg's RTSP probe reads ~1 s of it at open
SAMPLE_FPS = 2.0
FRAME_S = 1.0 / SOURCE_FPS
RETRY = ReconnectPolicy(initial_delay_s=0.1, max_delay_s=0.3, give_up_after_s=20.0)
WAIT_S = 15.0  # bound on any single wait for an expected clip or event


@pytest.fixture(scope="module")
def video(tmp_path_factory) -> Path:
    """60 s of 160x120 H.264 in Matroska, a keyframe every second, frame index drawn in each frame."""
    require_rtsp_server()
    media = Media(tmp_path_factory.mktemp("rtsp"))
    options = {"preset": "ultrafast", "g": str(SOURCE_FPS)}
    return media.video("live.mkv", "libx264", (160, 120), fps=SOURCE_FPS, duration_s=60.0, options=options)


@dataclass
class Watched:
    """A running capture and everything it handed over so far."""

    capture: CaptureThread
    clips: list[Clip] = field(default_factory=list)
    events: list[CaptureEvent] = field(default_factory=list)
    end: EndOfStream | None = None

    def pump(self) -> None:
        """Take every clip and event waiting now (never waits)."""
        while self.end is None and (item := self.capture.get_clip(timeout=0)) is not None:
            if isinstance(item, EndOfStream):
                self.end = item
            else:
                self.clips.append(item)
        self.events += self.capture.poll_events()

    @property
    def pairs(self) -> list[tuple[int, float]]:
        """(frame index drawn in the frame, stream time) of every frame received."""
        return [(read_marker(f), t) for c in self.clips for f, t in zip(c.frames, c.timestamps, strict=True)]

    def of_type(self, type_: str) -> list[CaptureEvent]:
        return [e for e in self.events if e.type == type_]


def wait_for(watched: list[Watched], done: Callable[[], bool], what: str) -> None:
    """Pump every capture until ``done()``; fails after WAIT_S seconds or when a capture ended."""
    deadline = time.monotonic() + WAIT_S
    while True:
        for w in watched:
            w.pump()
            assert w.end is None, f"{w.capture.description} ended while waiting for {what}: {w.end}"
        if done():
            return
        assert time.monotonic() < deadline, f"no {what} within {WAIT_S:g} s; events: {[w.events for w in watched]}"
        time.sleep(0.02)


@pytest.fixture
def watch():
    """Starts CaptureThreads on URLs; every one is stopped and joined at the end of the test."""
    started: list[Watched] = []

    def start(url: str, transport: str = "tcp") -> Watched:
        config = CaptureConfig(
            url,
            fps=SAMPLE_FPS,
            clip_seconds=1.0,
            queue_size=100,
            open_timeout_s=10.0,
            read_timeout_s=2.0,
            rtsp_transport=transport,
            reconnect=RETRY,
        )
        w = Watched(CaptureThread(config, threading.Event()))
        started.append(w)
        w.capture.start()
        return w

    yield start
    for w in started:
        w.capture.close()
    assert all(w.capture.join(0) for w in started), "a capture thread outlived close()"


def assert_sampled_timeline(w: Watched) -> None:
    """Stream times increase by the sampling interval (one source frame of rounding) with no gap."""
    times = [t for _, t in w.pairs]
    steps = [b - a for a, b in zip(times, times[1:], strict=False)]
    assert steps and all(abs(s - 1.0 / SAMPLE_FPS) <= FRAME_S + 1e-6 for s in steps), steps


def assert_frames_match_times(pairs: list[tuple[int, float]]) -> None:
    """Within one connection, each frame's stream time follows the frame index drawn in it."""
    m0, t0 = pairs[0]
    assert all(abs((m - m0) * FRAME_S - (t - t0)) <= FRAME_S + 1e-6 for m, t in pairs), pairs


def assert_played_from_the_start(w: Watched) -> None:
    """Every client gets the video from its first frame: stream time = frame index / fps."""
    assert w.pairs[0] == (0, 0.0)
    assert_frames_match_times(w.pairs)


@pytest.mark.parametrize("transport", ["tcp", "udp"])
def test_rtsp_stream_delivers_clips_with_stream_times(video, watch, transport):
    with RtspServer(video) as server:
        cam = watch(server.url, transport)
        wait_for([cam], lambda: len(cam.clips) >= 3, "3 clips")
    assert [c.index for c in cam.clips[:3]] == [0, 1, 2]
    for i, clip in enumerate(cam.clips[:3]):
        assert clip.frames.shape == (2, 120, 160, 3)
        assert i <= clip.timestamps[0] < clip.timestamps[-1] < i + 1 <= clip.t_end
    assert_sampled_timeline(cam)
    assert_played_from_the_start(cam)
    assert cam.capture.stats().reconnects == 0 and cam.of_type("reconnect") == []


def test_three_rtsp_streams_captured_at_once(video, watch):
    with RtspServer(video, paths=("cam0", "cam1")) as server:
        cams = [watch(server.url_for("cam0")), watch(server.url_for("cam1"))]
        wait_for(cams, lambda: len(cams[0].clips) >= 1, "a clip from cam0")
        cams.append(watch(server.url_for("cam0")))  # a second client of cam0, joining later
        wait_for(cams, lambda: all(len(w.clips) >= 3 for w in cams), "3 clips from every stream")
    for w in cams:
        assert_sampled_timeline(w)
        assert_played_from_the_start(w)
        assert w.capture.stats().reconnects == 0 and w.events == []


def test_rtsp_server_restart_is_reconnected_while_another_stream_goes_on(video, watch):
    with RtspServer(video) as restarted, RtspServer(video) as steady:
        cam, other = watch(restarted.url), watch(steady.url)
        both = [cam, other]
        wait_for(both, lambda: len(cam.clips) >= 2 and len(other.clips) >= 2, "2 clips from each stream")
        port = restarted.port
        before = len(cam.clips)
        restarted.restart(down_s=1.0)
        assert restarted.port == port and restarted.starts == 2
        wait_for(both, lambda: cam.of_type("reconnected"), "the reconnection")
        wait_for(both, lambda: len(cam.clips) >= before + 3, "3 clips after the reconnection")
        steady_clips = len(other.clips)
        wait_for(both, lambda: len(other.clips) > steady_clips, "one more clip from the steady stream")

    dropped, reconnected = cam.of_type("reconnect")[0], cam.of_type("reconnected")[0]
    assert "reconnecting" in dropped.message and "reconnected" in reconnected.message
    assert cam.capture.stats().reconnects == 1
    times = [t for _, t in cam.pairs]
    assert times == sorted(times) and len(set(times)) == len(times)
    # the restarted server plays the video from its start again: the frame index goes back, time does not
    frames_before = sum(c.num_frames for c in cam.clips[:before])
    back = [i for i in range(1, len(cam.pairs)) if cam.pairs[i][0] < cam.pairs[i - 1][0]]
    assert len(back) == 1 and back[0] >= frames_before, cam.pairs
    assert cam.pairs[back[0]][0] <= SOURCE_FPS / SAMPLE_FPS  # sampled within the first interval of the video
    assert_frames_match_times(cam.pairs[: back[0]])
    assert_frames_match_times(cam.pairs[back[0] :])

    # the other stream never noticed: no event, no gap in its timeline, clips arriving while cam was down
    assert other.events == [] and other.capture.stats().reconnects == 0
    assert_sampled_timeline(other)
    assert_played_from_the_start(other)
    assert any(dropped.wall_time < c.wall_time < reconnected.wall_time for c in other.clips)


def test_stopped_server_refuses_connections_and_restarts_on_its_port(video):
    server = RtspServer(video, paths=("a", "b"))
    with server:
        url = server.url_for("b")
    assert not server.running
    with pytest.raises(SourceError, match="connection refused"):
        CaptureThread(CaptureConfig(url, open_timeout_s=5.0), threading.Event())
    with server:
        assert server.url_for("b") == url
        capture = CaptureThread(CaptureConfig(url, open_timeout_s=10.0), threading.Event())
        capture.close()
    with pytest.raises(ValueError, match="unknown path"):
        server.url_for("c")
