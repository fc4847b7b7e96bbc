"""Video files and network streams decoded with PyAV (FFmpeg).

Bad packets (demux or decode errors) are skipped and counted; decoding goes on. A live stream that
stops delivering (timeout, reset, closed by the server) raises ``StreamDropped`` for the thread to
reconnect. Opening decodes the first frame, so an unreadable source fails before the stream starts.
"""

from __future__ import annotations

import errno
import logging
import os
from collections.abc import Iterator
from pathlib import Path

import av
import av.error
import numpy as np

from capture.config import CaptureConfig, SourceSpec
from capture.credentials import with_userinfo
from capture.errors import SourceError, StreamDropped
from capture.frame_limits import check_frame_size
from capture.pinned import pinned
from capture.rtsp_guard import RtspGuard
from capture.source import RawFrame

logger = logging.getLogger(__name__)

# Errors that mean "the connection is gone" rather than "this packet is bad".
_DROP_ERRORS = (
    av.error.ExitError,  # PyAV's read timeout fired
    av.error.TimeoutError,
    av.error.ConnectionResetError,
    av.error.ConnectionAbortedError,
    av.error.BrokenPipeError,
    av.error.HTTPError,
    av.error.OSError,
    av.error.EOFError,
)
_MAX_PACKETS_BEFORE_FIRST_FRAME = 2000

# FFmpeg's protocol_whitelist per source scheme: what FFmpeg may open for a source and inside it (an HLS
# playlist's segments, a DASH manifest's, an SDP's RTP ports). Nothing here can read a local file from a
# network source, and nothing can listen on a port except the scheme the operator named at start.
PROTOCOLS = {
    "file": ("file",),
    "http": ("http", "https", "tcp", "tls", "crypto", "httpproxy"),
    "https": ("http", "https", "tcp", "tls", "crypto", "httpproxy"),
    "rtsp": ("rtsp", "rtsps", "rtp", "srtp", "tcp", "udp", "tls"),
    "rtsps": ("rtsp", "rtsps", "rtp", "srtp", "tcp", "udp", "tls"),
    "rtmp": ("rtmp", "rtmps", "tcp", "tls"),
    "srt": ("srt", "udp"),
    "udp": ("udp",),
    "tcp": ("tcp",),
}


# The demuxers a source chosen while running may use (FFmpeg's `format_whitelist`): single streams only. Left out
# are the playlist and manifest demuxers (hls, dash, concat, ...), which fetch whatever URLs the file names, on
# hosts the source policy never saw. The operator's sources keep every demuxer.
RUN_TIME_FORMATS = ("rtsp", "mpegts", "mpjpeg", "mjpeg", "mov", "matroska", "flv", "avi", "h264", "hevc", "ivf")


def protocol_whitelist(spec: SourceSpec) -> str:
    """FFmpeg's ``protocol_whitelist`` for `spec`: the protocols its scheme needs (files: ``file`` only)."""
    if spec.kind != "url":
        return ",".join(PROTOCOLS["file"])
    scheme = str(spec.target).split(":", 1)[0].lower()
    return ",".join(PROTOCOLS[scheme])


def _open_hint(spec: SourceSpec, config: CaptureConfig, err: Exception) -> str:
    """What went wrong opening ``spec`` and what to try, in one message."""
    desc = spec.describe()
    if spec.kind == "url":
        if isinstance(err, av.error.ConnectionRefusedError):
            return f"cannot open {desc}: connection refused; check the host and port, and that the server runs"
        if isinstance(err, (av.error.ExitError, av.error.TimeoutError)):
            return (
                f"cannot open {desc}: no answer within {config.open_timeout_s:g} s; check the URL and the "
                "network, or raise the open timeout"
            )
        if isinstance(err, av.error.HTTPNotFoundError):
            return f"cannot open {desc}: the server answered 404 Not Found; check the path in the URL"
        if isinstance(err, (av.error.HTTPUnauthorizedError, av.error.HTTPForbiddenError)):
            return (
                f"cannot open {desc}: access denied ({err}); check the login (a credentials_file, "
                "EDGE_ASSISTANT_SOURCE_CREDENTIALS_<STREAM>, or user:pass@host in the URL)"
            )
        if isinstance(err, av.error.ProtocolNotFoundError):
            return f"cannot open {desc}: this FFmpeg build does not support the protocol; try http or rtsp"
        # FFmpeg answers a format off the whitelist with EINVAL ("Format not on whitelist" goes to its log only)
        if not config.follow_redirects and getattr(err, "errno", None) == errno.EINVAL:
            return (
                f"cannot open {desc}: a playlist or manifest (HLS, DASH) or another format not allowed for sources "
                f"chosen while running (allowed: {', '.join(RUN_TIME_FORMATS)}): its segments could come from any "
                "host; give the camera's own stream URL, or the playlist at start (--stream NAME=URL)"
            )
        if isinstance(err, av.error.InvalidDataError):
            return f"cannot open {desc}: the server sent data that is not a video stream FFmpeg can read"
        if not config.follow_redirects and isinstance(err, av.error.OSError):
            return (
                f"cannot open {desc}: {err}; redirects are not followed for sources chosen while running: give the "
                "URL the stream is finally served from"
            )
        return f"cannot open {desc}: {err}; check the URL, the network and that the stream is live"
    if isinstance(err, av.error.PermissionError):
        return f"cannot open {desc}: permission denied; check the file's permissions"
    if isinstance(err, av.error.FFmpegError):  # damaged headers read as invalid data, EOF, I/O error, ...
        return (
            f"cannot open {desc}: not a video FFmpeg can read, or truncated/corrupt ({err}); give a "
            "complete video file (mp4, mkv, webm, avi, mov). An mp4 cut off while recording has no index "
            "and cannot be opened: re-download or re-record it (.mkv/.ts stay readable when cut)"
        )
    return f"cannot open {desc}: {err}; check that it is a readable video file"


def _check_path(spec: SourceSpec) -> None:
    path = Path(str(spec.target)).expanduser()
    if not path.exists():
        raise SourceError(
            f"cannot open {spec.describe()}: no such file (working directory: {os.getcwd()}); check the "
            "path, or use --camera INDEX for a camera or a URL (http://, rtsp://) for a stream"
        )
    if path.is_dir():
        raise SourceError(f"cannot open {spec.describe()}: it is a directory; give a video file inside it")
    if path.stat().st_size == 0:
        raise SourceError(f"cannot open {spec.describe()}: the file is empty; give a complete video file")


class AvSource:
    """An opened file or network stream; ``frames()`` yields its decoded video frames."""

    def __init__(self, container: av.container.InputContainer, config: CaptureConfig, stream: av.VideoStream) -> None:
        self.config = config
        self.spec = config.spec
        self.description = config.spec.describe()
        self.is_live = config.spec.kind == "url"
        self.bad_packets = 0
        self._container = container
        self._stream = stream
        self._last_time: float | None = None
        self._interpolation = "AREA"
        self._decoded: Iterator[RawFrame] = self._decode()
        self._first: RawFrame | None = None
        self._checked_size: tuple[int, int] | None = None
        self._guard: RtspGuard | None = None  # the relay an rtsp:// source chosen while running goes through

    @classmethod
    def open(cls, config: CaptureConfig) -> AvSource:
        """Open ``config.source`` and decode its first frame.

        Raises:
            SourceError: naming the source and what to try.
        """
        spec = config.spec
        options: dict[str, str] = {}
        container_options = {"protocol_whitelist": protocol_whitelist(spec)}
        timeout = None
        if spec.kind == "url":
            timeout = (config.open_timeout_s, config.read_timeout_s)
            if str(spec.target).lower().startswith(("rtsp://", "rtsps://")):
                options["rtsp_transport"] = config.rtsp_transport
            elif not config.follow_redirects:
                container_options["max_redirects"] = "0"  # FFmpeg's http option (older builds ignore it)
            if not config.follow_redirects:  # chosen while running: no playlists
                container_options["format_whitelist"] = ",".join(RUN_TIME_FORMATS)
        else:
            _check_path(spec)
        target = str(Path(str(spec.target)).expanduser()) if spec.kind == "file" else str(spec.target)
        guard = None
        if config.connect_to is not None:  # the checked address only, never the name resolved again
            target, host, guard = pinned(target, config.connect_to, config.open_timeout_s)
            if host is not None:
                container_options["headers"] = f"Host: {host}\r\n"
            if guard is not None:
                options["rtsp_transport"] = "tcp"  # RTP inside the relayed connection
        if config.credentials is not None:  # joined here only: the URL shown and stored never holds them
            target = with_userinfo(target, config.credentials)
        try:
            source = cls._open(config, target, options, container_options, timeout)
        except BaseException as err:
            if guard is not None:
                guard.close()
                if guard.refusal is not None and isinstance(err, SourceError):
                    raise SourceError(
                        f"cannot open {spec.describe()}: the RTSP server answered {guard.refusal}; redirects are "
                        "not followed for sources chosen while running: give the URL the stream is finally served "
                        "from (its address must pass the source policy too)"
                    ) from err
            raise
        source._guard = guard
        return source

    @classmethod
    def _open(
        cls, config: CaptureConfig, target: str, options: dict[str, str], container_options: dict[str, str], timeout
    ) -> AvSource:
        """Opens `target` (what FFmpeg connects to, login joined) and decodes its first frame."""
        spec = config.spec
        try:
            container = _open_container(target, options, container_options, timeout)
        except (av.error.FFmpegError, OSError) as err:
            raise SourceError(_open_hint(spec, config, err)) from err
        if not container.streams.video:
            kinds = sorted({s.type for s in container.streams}) or ["none"]
            container.close()
            raise SourceError(
                f"cannot open {spec.describe()}: it has no video stream (streams found: {', '.join(kinds)}); "
                "give a file or URL with video"
            )
        # a stream whose codec FFmpeg does not know (or whose header is damaged) has no decoder
        decodable = [s for s in container.streams.video if s.codec_context is not None]
        if not decodable:
            container.close()
            raise SourceError(
                f"cannot open {spec.describe()}: its video is in a codec this FFmpeg build cannot decode, or "
                "its header is damaged; re-encode it (e.g. H.264 in mp4) or give another file"
            )
        source = cls(container, config, decodable[0])
        try:
            header = decodable[0].codec_context
            if header.width and header.height:  # refused before a huge frame is decoded
                source._check_size(header.width, header.height)
            source._first = source._first_frame()
        except BaseException:
            source.close()
            raise
        return source

    def _first_frame(self) -> RawFrame:
        codec = self._stream.codec_context
        codec.thread_type = "AUTO"
        codec.thread_count = self.config.decoder_threads
        try:
            frame = next(self._decoded, None)
        except (StreamDropped, av.error.FFmpegError) as err:
            raise SourceError(
                f"cannot read {self.description}: {err}; check that the source is a complete, working video"
            ) from err
        if frame is None:
            raise SourceError(
                f"cannot read {self.description}: no video frame could be decoded "
                f"({self.bad_packets} bad packets); the video is empty, corrupt or uses an unsupported codec"
            )
        logger.info(
            "opened %s: %s %dx%d, %s fps",
            self.description,
            codec.name,
            self._stream.width,
            self._stream.height,
            self._stream.average_rate,
        )
        return frame

    def frames(self) -> Iterator[RawFrame]:
        """Yield frames from the first (decoded at open) to the end.

        Raises:
            StreamDropped: a network stream stopped delivering.
            SourceError: a file became unreadable (too many bad packets in a row).
        """
        if self._first is not None:
            first, self._first = self._first, None
            yield first
        yield from self._decoded

    def _bad_packet(self, err: Exception, consecutive: int) -> None:
        self.bad_packets += 1
        logger.debug("%s: skipped a bad packet: %s", self.description, err)
        if consecutive >= self.config.max_consecutive_errors:
            msg = f"{self.description}: {consecutive} bad packets in a row (last: {err})"
            if self.is_live:
                raise StreamDropped(msg) from err
            raise SourceError(msg + "; the rest of the file is unreadable") from err

    def _decode(self) -> Iterator[RawFrame]:
        consecutive = 0
        packets_without_frame = 0
        demux = self._container.demux(self._stream)
        while True:
            try:
                packet = next(demux)
            except StopIteration:
                break
            except _DROP_ERRORS as err:
                why = f"read failed: {err}"
                if isinstance(err, av.error.ExitError):
                    why = f"no data for {self.config.read_timeout_s:g} s (read timeout)"
                if self.is_live:
                    raise StreamDropped(f"{self.description}: {why}") from err
                raise SourceError(f"{self.description}: {why}") from err
            except av.error.FFmpegError as err:
                consecutive += 1
                self._bad_packet(err, consecutive)
                demux = self._container.demux(self._stream)  # a failed generator is finished: resume
                continue
            if packet.is_corrupt:
                consecutive += 1
                self._bad_packet(ValueError("packet flagged corrupt by the demuxer"), consecutive)
                continue
            try:
                decoded = packet.decode()
            except av.error.FFmpegError as err:  # any decoder complaint about this packet: skip it
                consecutive += 1
                self._bad_packet(err, consecutive)
                continue
            consecutive = 0
            packets_without_frame = 0 if decoded else packets_without_frame + 1
            if self._last_time is None and packets_without_frame > _MAX_PACKETS_BEFORE_FIRST_FRAME:
                raise SourceError(f"{self.description}: no frame decoded from the first packets")
            for frame in decoded:
                yield self._raw(frame)
        self._end_of_input()

    def _end_of_input(self) -> None:
        """The demuxer reached its end: fine for a file; for a live stream it is a drop unless it was
        a finite stream (known duration) played to its end."""
        if not self.is_live:
            return
        duration = self._container.duration
        if duration and self._last_time is not None:
            start = (self._container.start_time or 0) / av.time_base
            if self._last_time >= start + duration / av.time_base - 1.0:
                return
        raise StreamDropped(f"{self.description}: the server closed the stream")

    def _check_size(self, width: int, height: int) -> None:
        """Raises SourceError when frames of `width` x `height` are out of bounds (capture.frame_limits)."""
        if (width, height) != self._checked_size:
            limits = self.config.max_source_pixels, self.config.max_aspect_ratio
            check_frame_size(self.description, width, height, *limits)
            self._checked_size = (width, height)

    def _raw(self, frame: av.VideoFrame) -> RawFrame:
        self._check_size(frame.width, frame.height)
        t = frame.time
        self._last_time = t if t is not None else self._last_time
        interp = self._interpolation

        def to_rgb(width: int, height: int) -> np.ndarray:
            scale = width != frame.width or height != frame.height
            return frame.to_ndarray(format="rgb24", width=width, height=height, interpolation=interp if scale else None)

        return RawFrame(time=t, width=frame.width, height=frame.height, to_rgb=to_rgb)

    def close(self) -> None:
        """Close the decoder generator and the container, and drop the codec context (idempotent).

        FFmpeg's decoder threads end when the codec context is freed, i.e. when the last reference
        to the stream goes; so none is kept here after closing.
        """
        if self._stream is None:
            return
        self._decoded.close()
        self._container.close()
        if self._guard is not None:
            self._guard.close()
        self._first = None
        self._stream = None


def _open_container(target: str, options: dict[str, str], container_options: dict[str, str], timeout):
    """av.open for reading. Metadata that is not valid UTF-8 (damaged or mislabelled) must not make a video
    unreadable: PyAV before 19 is told to replace it (`metadata_errors`); PyAV 19 dropped that argument."""
    kwargs = dict(mode="r", options=options, container_options=container_options, timeout=timeout)
    if _TAKES_METADATA_ERRORS:
        return av.open(target, metadata_errors="replace", **kwargs)
    return av.open(target, **kwargs)


_TAKES_METADATA_ERRORS = int(av.__version__.split(".")[0]) < 19
