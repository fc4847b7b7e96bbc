"""A source chosen while running reaches the address the source policy checked and no other (issue 39): an RTSP
302 from an allowed host led FFmpeg to a refused address, and FFmpeg resolved the host again when it connected
(DNS rebinding). Now the host is resolved once, by the policy, and the capture connects to that IP
(capture.pinned): http(s) with the name as Host, rtsp through a relay that refuses redirects
(capture.rtsp_guard). Real servers on 127.0.0.2 (allowed) and 127.0.0.1 (refused: where the libc resolver FFmpeg
uses sends `localhost`), one port for both."""

from __future__ import annotations

import socket

import pytest

from capture import SourceError, open_source
from capture.options import CaptureOptions
from capture.policy import SourcePolicy, SourceRefused
from tests.support.capture_helpers import Media
from tests.support.fake_sources import FakeRtsp, FileHttp

ALLOWED, REFUSED = "127.0.0.2", "127.0.0.1"


def _options(allowed: str = ALLOWED) -> CaptureOptions:
    return CaptureOptions(policy=SourcePolicy(allow_nets=(f"{allowed}/32",)), realtime=False)


@pytest.fixture
def rebinding(monkeypatch) -> list[str]:
    """`localhost` resolves in Python to the allowed address the first time and to the refused one after, as the
    libc resolver FFmpeg uses does (127.0.0.1); returns the names resolved in Python."""
    real, asked = socket.getaddrinfo, []

    def getaddrinfo(host, *args, **kwargs):
        if host != "localhost":
            return real(host, *args, **kwargs)
        asked.append(host)
        address = ALLOWED if len(asked) == 1 else REFUSED
        return [(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP, "", (address, 0))]

    monkeypatch.setattr(socket, "getaddrinfo", getaddrinfo)
    return asked


def test_an_rtsp_redirect_to_a_refused_address_is_not_followed() -> None:
    with FakeRtsp(REFUSED) as target:
        with FakeRtsp(ALLOWED, status="302 Moved", headers=f"Location: {target.url}\r\n") as camera:
            config = _options().config(camera.url)
            with pytest.raises(SourceError, match=r"answered a redirect \(RTSP/1.0 302 Moved\) to rtsp://127.0.0.1"):
                open_source(config)
            assert camera.connections >= 1
        assert target.connections == 0


def test_rtsp_connects_to_the_checked_address_only(rebinding) -> None:
    with FakeRtsp(REFUSED) as internal, FakeRtsp(ALLOWED, port=internal.port) as camera:
        config = _options().config(f"rtsp://localhost:{camera.port}/live")
        assert config.connect_to == ALLOWED and config.source == f"rtsp://localhost:{camera.port}/live"
        with pytest.raises(SourceError):  # the fake camera answers 404
            open_source(config)
        assert camera.connections >= 1
        assert internal.connections == 0
    assert rebinding == ["localhost"]


def test_http_connects_to_the_checked_address_naming_the_host(tmp_path, rebinding) -> None:
    Media(tmp_path).video("cam.ts", "libx264", (64, 48), fps=4, duration_s=2.0)
    with FileHttp(tmp_path, ALLOWED) as camera, FileHttp(tmp_path, REFUSED, port=camera.port) as internal:
        url = f"http://localhost:{camera.port}/cam.ts"
        source = open_source(_options().config(url))
        try:
            frame = next(iter(source.frames()))
        finally:
            source.close()
        assert (frame.width, frame.height) == (64, 48)
        assert camera.hosts and set(camera.hosts) == {f"localhost:{camera.port}"}
        assert internal.hosts == []


def test_a_real_rtsp_stream_plays_through_the_relay(tmp_path) -> None:
    from tests.support.rtsp_server import RtspServer, require_rtsp_server

    require_rtsp_server()
    video = Media(tmp_path).video("live.mkv", "libx264", (64, 48), fps=4, duration_s=10.0, options={"g": "4"})
    with RtspServer(video) as server:
        source = open_source(_options(allowed="127.0.0.1").config(server.url))
        try:
            frames = [frame for frame, _ in zip(source.frames(), range(3), strict=False)]
        finally:
            source.close()
    assert [(f.width, f.height) for f in frames] == [(64, 48)] * 3


@pytest.mark.parametrize(
    ("url", "why"),
    [
        ("rtsps://127.0.0.2/live", "rtsps:// sources cannot be chosen while running"),
        ("rtsp://127.0.0.2/live?udp", r"another transport \(udp\)"),
        ("rtsp://127.0.0.2/live?a=1?multicast", r"another transport \(multicast\)"),
        ("rtsp://127.0.0.2/live?x&http", r"another transport \(http\)"),
    ],
)
def test_rtsp_forms_that_leave_the_connection_are_refused(url, why) -> None:
    with pytest.raises(SourceRefused, match=why):
        _options().config(url)
