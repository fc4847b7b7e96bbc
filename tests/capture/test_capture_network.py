"""Network streams for real: an MPEG-TS served over HTTP on 127.0.0.1 by a server that cuts or stalls
connections, so reconnection, read timeouts and timeline continuity are exercised end to end."""

from __future__ import annotations

import threading
import time

import pytest

from capture import CaptureConfig, CaptureThread, EndOfStream, ReconnectPolicy, SourceError
from capture.synth import read_marker
from tests.support.capture_helpers import Media, SilentServer, TsServer, closed_port_url, drain

FPS = 10  # source frame rate of the test stream
FAST_RETRY = ReconnectPolicy(initial_delay_s=0.05, max_delay_s=0.1, max_attempts=2)


@pytest.fixture(scope="module")
def ts_bytes(tmp_path_factory) -> bytes:
    media = Media(tmp_path_factory.mktemp("capture_net"))
    path = media.video("live.ts", "libx264", (160, 120), fps=FPS, duration_s=6.0, options={"g": "10"})
    return path.read_bytes()


def stream_config(url: str, **kwargs) -> CaptureConfig:
    kwargs = {"fps": 2.0, "clip_seconds": 1.0, "queue_size": 100, "reconnect": FAST_RETRY, **kwargs}
    return CaptureConfig(url, read_timeout_s=kwargs.pop("read_timeout_s", 2.0), **kwargs)


def markers_and_times(clips):
    return [(read_marker(f), t) for c in clips for f, t in zip(c.frames, c.timestamps, strict=True)]


def test_cut_connection_is_reconnected_and_the_timeline_continues(ts_bytes):
    with TsServer(ts_bytes, plan=[len(ts_bytes) // 2, None]) as server:
        cap = CaptureThread(stream_config(server.url), threading.Event())
        out = drain(cap)
    assert server.requests >= 2
    assert cap.stats().reconnects == 1
    pairs = markers_and_times(out.clips)
    times = [t for _, t in pairs]
    assert times == sorted(times)
    assert times[-1] >= 5.0  # frames from after the cut arrived
    # the live timeline continued: each frame still shows the source frame its timestamp names
    assert all(abs(m / FPS - t) < 1.0 / FPS + 1e-6 for m, t in pairs)
    events = [e.type for e in cap.poll_events()]
    assert events[:2] == ["reconnect", "reconnected"]  # dropped, then reconnected
    assert events[-1] == "end"
    # the stream finally ended for good: the server says 404, the policy gives up
    assert out.end.reason == "error" and "gave up" in out.end.message


def test_stalled_connection_hits_the_read_timeout_and_reconnects(ts_bytes):
    with TsServer(ts_bytes, plan=["stall", None]) as server:
        cap = CaptureThread(stream_config(server.url, read_timeout_s=0.5), threading.Event())
        out = drain(cap)
    events = cap.poll_events()
    assert any(e.type == "reconnect" and "read timeout" in e.message for e in events)
    assert cap.stats().reconnects == 1
    assert out.timestamps[-1] >= 5.0


def test_restarted_stream_is_rebased_to_keep_time_increasing(ts_bytes):
    with TsServer(ts_bytes, plan=[len(ts_bytes) // 2, None], restart=True) as server:
        cap = CaptureThread(stream_config(server.url), threading.Event())
        out = drain(cap)
    pairs = markers_and_times(out.clips)
    times = [t for _, t in pairs]
    assert times == sorted(times) and len(set(times)) == len(times)
    markers = [m for m, _ in pairs]
    restart = next(i for i in range(1, len(markers)) if markers[i] < markers[i - 1])
    assert times[restart] > times[restart - 1]  # frame 0 again, but later in stream time
    assert times[-1] > 6.0  # more than one pass of a 6 s source


def test_stop_while_a_read_is_stalled_joins_within_two_seconds(ts_bytes):
    with TsServer(ts_bytes, plan=["stall"]) as server:
        stop = threading.Event()
        cap = CaptureThread(stream_config(server.url, read_timeout_s=1.0), stop)
        cap.start()
        while cap.stats().decoded_frames < 20:  # the stall starts halfway through the stream
            time.sleep(0.05)
        time.sleep(0.2)
        stop.set()
        start = time.monotonic()
        assert cap.join(2.0)
        assert time.monotonic() - start < 2.0


def test_stop_during_reconnect_backoff_joins_within_two_seconds(ts_bytes):
    slow_retry = ReconnectPolicy(initial_delay_s=30.0, max_delay_s=60.0)
    with TsServer(ts_bytes, plan=[len(ts_bytes) // 3]) as server:
        stop = threading.Event()
        cap = CaptureThread(stream_config(server.url, reconnect=slow_retry), stop)
        cap.start()
        deadline = time.monotonic() + 30
        while not any(e.type == "reconnect" for e in cap.events.drain()):
            assert time.monotonic() < deadline, "the stream never dropped"
            time.sleep(0.05)
        stop.set()
        assert cap.join(2.0)
        items = [cap.get_clip(timeout=1.0) for _ in range(cap.stats().clips + 1)]
        end = items[-1]
        assert isinstance(end, EndOfStream)
        assert end.reason == "stopped"


def test_unreachable_url_fails_at_open():
    url = closed_port_url()
    with pytest.raises(SourceError, match="connection refused") as info:
        CaptureThread(CaptureConfig(url), threading.Event())
    assert url in str(info.value)


def test_silent_server_times_out_at_open():
    with SilentServer() as server, pytest.raises(SourceError, match="no answer within 0.5 s"):
        CaptureThread(CaptureConfig(server.url, open_timeout_s=0.5), threading.Event())


def test_http_404_names_the_problem(ts_bytes):
    with TsServer(ts_bytes, plan=[]) as server, pytest.raises(SourceError, match="404"):
        CaptureThread(CaptureConfig(server.url), threading.Event())


def test_finite_file_over_http_ends_without_reconnecting(tmp_path_factory):
    media = Media(tmp_path_factory.mktemp("capture_http_file"))
    data = media.video("clip.mkv", "libx264", (160, 120), fps=FPS, duration_s=3.0).read_bytes()
    with TsServer(data, plan=[None], content_length=True) as server:
        cap = CaptureThread(stream_config(server.url), threading.Event())
        out = drain(cap)
    assert out.end.reason == "eof" and server.requests == 1
    assert cap.stats().reconnects == 0 and len(out.timestamps) == 6


def test_unreachable_rtsp_url_fails_at_open():
    url = closed_port_url().replace("http://", "rtsp://")
    with pytest.raises(SourceError, match="connection refused"):
        CaptureThread(CaptureConfig(url, rtsp_transport="tcp", open_timeout_s=2.0), threading.Event())
