"""A source chosen while running cannot be a playlist or manifest (issue 39): an HLS playlist on an allowed host
made FFmpeg fetch its segments from any host it named, one the source policy refuses included. FFmpeg's
`format_whitelist` for those sources leaves out the HLS, DASH and other playlist demuxers, so the segment host
is never contacted; the operator's own sources still play playlists."""

from __future__ import annotations

import shutil

import pytest

from capture import CaptureConfig, SourceError, open_source
from tests.support.capture_helpers import Media
from tests.support.source_servers import FolderServer


class Counting(FolderServer):
    """A FolderServer that counts the requests it gets."""

    def __init__(self, folder) -> None:
        super().__init__(folder)
        self.requests = 0
        handler = self.httpd.RequestHandlerClass
        server = self

        def counted(*args, **kwargs):
            server.requests += 1
            return handler(*args, **kwargs)

        self.httpd.RequestHandlerClass = counted


@pytest.fixture(scope="module")
def segment(tmp_path_factory):
    return Media(tmp_path_factory.mktemp("hls")).video("seg.ts", "libx264", (64, 48), fps=4, duration_s=2.0)


def _playlist(folder, segment_url: str) -> None:
    (folder / "live.m3u8").write_text(
        "#EXTM3U\n#EXT-X-VERSION:3\n#EXT-X-TARGETDURATION:2\n#EXT-X-MEDIA-SEQUENCE:0\n"
        f"#EXTINF:2.0,\n{segment_url}\n#EXT-X-ENDLIST\n"
    )


def test_a_playlist_chosen_while_running_fetches_no_segment(tmp_path, segment) -> None:
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "allowed").mkdir()
    shutil.copy(segment, tmp_path / "elsewhere" / "seg.ts")
    with Counting(tmp_path / "elsewhere") as elsewhere, FolderServer(tmp_path / "allowed") as allowed:
        _playlist(tmp_path / "allowed", elsewhere.url("seg.ts"))
        with pytest.raises(SourceError, match="playlist"):
            open_source(CaptureConfig(allowed.url("live.m3u8"), follow_redirects=False))
        assert elsewhere.requests == 0
        open_source(CaptureConfig(allowed.url("live.m3u8"))).close()  # the operator's source: played
        assert elsewhere.requests >= 1


def test_plain_streams_chosen_while_running_still_open(tmp_path, segment) -> None:
    shutil.copy(segment, tmp_path / "seg.ts")
    with FolderServer(tmp_path) as server:
        open_source(CaptureConfig(server.url("seg.ts"), follow_redirects=False)).close()


def test_an_rtsp_stream_chosen_while_running_still_opens(tmp_path) -> None:
    from tests.support.rtsp_server import RtspServer, require_rtsp_server

    require_rtsp_server()
    video = Media(tmp_path).video("live.mkv", "libx264", (64, 48), fps=4, duration_s=10.0, options={"g": "4"})
    with RtspServer(video) as server:
        open_source(CaptureConfig(server.url, follow_redirects=False)).close()
