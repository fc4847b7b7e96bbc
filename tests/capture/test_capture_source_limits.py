"""What the backends open inside a source: a gst: pipeline is one camera into the app's appsink (checked before
OpenCV or GStreamer sees it), and FFmpeg gets a protocol whitelist per source: a file source opens files only,
and a playlist served over HTTP cannot make FFmpeg read a local file. (FFmpeg 8 already refuses that HLS case by
its http protocol's default whitelist; the explicit one keeps it so on any FFmpeg and narrows it further.)"""

from __future__ import annotations

import functools
import http.server
import threading

import pytest

from capture import CaptureConfig, SourceError, open_source
from capture.av_source import protocol_whitelist
from capture.camera_source import CameraSource
from capture.gst_pipeline import check_camera_pipeline
from tests.support.capture_helpers import Media

JETSON_CSI = (
    "nvarguscamerasrc sensor-id=0 ! video/x-raw(memory:NVMM),width=1920,height=1080,framerate=30/1 ! nvvidconv ! "
    "video/x-raw,format=BGRx ! videoconvert ! video/x-raw,format=BGR ! appsink drop=1"
)


@pytest.mark.parametrize(
    "pipeline",
    [
        JETSON_CSI,
        "v4l2src device=/dev/video0 ! videoconvert ! appsink",
        "v4l2src ! image/jpeg,width=1280,height=720 ! jpegdec ! videoconvert ! appsink max-buffers=1 drop=true",
        "libcamerasrc ! video/x-raw,width=640,height=480 ! videoconvert ! appsink",
    ],
)
def test_camera_pipelines_into_appsink_are_accepted(pipeline):
    check_camera_pipeline(pipeline)


@pytest.mark.parametrize(
    ("pipeline", "why"),
    [
        ("v4l2src ! tee name=t ! appsink t. ! queue ! filesink location=/tmp/x", "'tee' is not allowed"),
        ("v4l2src ! videoconvert ! appsink t. ! queue ! filesink location=/tmp/x", "'appsink' is not allowed there"),
        ("v4l2src ! videoconvert ! appsink t.", "'t.' after appsink is not a plain property=value"),
        ("v4l2src ! videoconvert ! filesink location=/tmp/x", "'filesink' is not allowed"),
        ("v4l2src ! jpegenc ! multifilesink location=/tmp/%d.jpg", "'jpegenc' is not allowed"),
        ("v4l2src ! x264enc ! mpegtsmux ! tcpserversink host=0.0.0.0 port=5000", "'x264enc' is not allowed"),
        ("filesrc location=/etc/passwd ! appsink", "'filesrc' is not allowed"),
        ("videotestsrc ! appsink", "'videotestsrc' is not allowed"),
        ("souphttpsrc location=http://127.0.0.1/ ! appsink", "'souphttpsrc' is not allowed"),
        ("v4l2src ! appsink name=sink", "property 'name=sink' is not allowed"),
        ('v4l2src ! appsink caps="video/x-raw"', "is not a plain property=value"),
        ("v4l2src ! ( queue ! appsink )", "is not an element name"),
        ("v4l2src", "one chain"),
        ("v4l2src ! ! appsink", "one chain"),
        ("v4l2src ! video/x-raw", "caps cannot start or end it"),
    ],
)
def test_other_pipelines_are_refused_naming_what_is_allowed(pipeline, why):
    with pytest.raises(ValueError) as refused:
        check_camera_pipeline(pipeline)
    assert why in str(refused.value) and "CAMERA ! ... ! appsink" in str(refused.value)


def test_the_camera_backend_refuses_a_writing_pipeline_before_opening_anything():
    opened = []

    def factory(target, api):
        opened.append(target)
        raise AssertionError("the pipeline reached the capture backend")

    config = CaptureConfig("gst:v4l2src ! tee name=t ! appsink t. ! queue ! filesink location=/tmp/x")
    with pytest.raises(SourceError, match="'tee' is not allowed"):
        CameraSource.open(config, factory=factory)
    assert opened == []


def test_each_source_gets_the_protocols_its_scheme_needs_and_files_only_file():
    assert protocol_whitelist(CaptureConfig("clip.mp4").spec) == "file"
    assert protocol_whitelist(CaptureConfig("concat:/a.ts|/b.ts").spec) == "file"
    http = protocol_whitelist(CaptureConfig("https://camera.example.com/live.m3u8").spec).split(",")
    assert "file" not in http and "udp" not in http and {"http", "https", "tcp", "tls"} <= set(http)
    rtsp = protocol_whitelist(CaptureConfig("rtsp://camera.example.com/stream").spec).split(",")
    assert "file" not in rtsp and {"rtsp", "rtp", "tcp", "udp"} <= set(rtsp)


@pytest.fixture(scope="module")
def segment(tmp_path_factory):
    media = Media(tmp_path_factory.mktemp("whitelist"))
    return media.video("secret.ts", "libx264", (64, 48), fps=4, duration_s=2.0)


class PlaylistServer:
    """Serves an HLS playlist on 127.0.0.1 whose one segment is a file on this machine (file:// URL)."""

    def __init__(self, folder, segment):
        (folder / "index.m3u8").write_text(
            "#EXTM3U\n#EXT-X-VERSION:3\n#EXT-X-TARGETDURATION:2\n#EXT-X-MEDIA-SEQUENCE:0\n"
            f"#EXTINF:2.0,\nfile://{segment}\n#EXT-X-ENDLIST\n"
        )
        self.requests: list[str] = []
        requests = self.requests

        class Handler(http.server.SimpleHTTPRequestHandler):
            def log_message(self, *args):
                requests.append(self.path)

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(Handler, directory=folder))
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/index.m3u8"
        self.thread = threading.Thread(target=self.httpd.serve_forever, args=(0.05,), daemon=True)

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.httpd.shutdown()
        self.httpd.server_close()
        self.thread.join(5)


def test_a_playlist_served_over_http_cannot_make_ffmpeg_read_a_local_file(tmp_path, segment):
    with PlaylistServer(tmp_path, segment) as server:
        with pytest.raises(SourceError, match="cannot open stream"):
            open_source(CaptureConfig(server.url, open_timeout_s=10.0))
    assert server.requests == ["/index.m3u8"]  # the playlist was fetched; its file segment never opened


class RedirectServer:
    """Serves a video on 127.0.0.1 and, at /elsewhere, a 302 redirect to it (a redirect could as well lead to an
    internal address the source policy refuses)."""

    def __init__(self, video):
        name = video.name

        class Handler(http.server.SimpleHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_GET(self):
                if self.path != "/elsewhere":
                    return super().do_GET()
                self.send_response(302)
                self.send_header("Location", f"/{name}")
                self.send_header("Content-Length", "0")
                self.end_headers()

        handler = functools.partial(Handler, directory=video.parent)
        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
        base = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        self.direct, self.redirect = f"{base}/{name}", f"{base}/elsewhere"
        self.thread = threading.Thread(target=self.httpd.serve_forever, args=(0.05,), daemon=True)

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.httpd.shutdown()
        self.httpd.server_close()
        self.thread.join(5)


def test_redirects_are_followed_only_for_sources_that_allow_them(tmp_path_factory):
    video = Media(tmp_path_factory.mktemp("redirect")).video("clip.mp4", "libx264", (64, 48), fps=4, duration_s=2.0)
    with RedirectServer(video) as server:
        open_source(CaptureConfig(server.redirect)).close()  # the operator's source: followed
        open_source(CaptureConfig(server.direct, follow_redirects=False)).close()
        with pytest.raises(SourceError, match="redirects are not followed for sources chosen while running"):
            open_source(CaptureConfig(server.redirect, follow_redirects=False))
