"""A real RTSP server on 127.0.0.1 for the capture tests: GStreamer's RTSP server (gst-rtsp-server) in
a subprocess of the system python3, serving an H.264 Matroska file on one or more paths.

The test side (``RtspServer``) needs only the standard library. The server side (``python3 -m`` is not
used: the file is run as a script by ``/usr/bin/python3``, which has Debian's ``python3-gi``) needs the
Debian packages in ``RTSP_PACKAGES``. Every client of every path gets its own playback of the file from
its first frame, at the file's real time (not shared: with a shared media one client's PLAY, which FFmpeg
sends with ``Range: npt=0``, would seek every other client back); the stream ends with the file.

Example::

    with RtspServer(video_mkv, paths=("cam0", "cam1")) as server:
        capture = CaptureThread(CaptureConfig(server.url_for("cam1")), stop)
        ...
        server.restart()  # the process is killed (like a crash) and started again on the same port
"""

from __future__ import annotations

import os
import selectors
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

SYSTEM_PYTHON = "/usr/bin/python3"
RTSP_PACKAGES = "python3-gi gir1.2-gst-rtsp-server-1.0 gstreamer1.0-plugins-good"
# matroskademux and rtph264pay are in gstreamer1.0-plugins-good
_ELEMENTS = ("filesrc", "matroskademux", "rtph264pay")


def rtsp_server_missing() -> str | None:
    """None when the server can run here; otherwise what is missing and the Debian packages to install."""
    if not os.access(SYSTEM_PYTHON, os.X_OK):
        return f"{SYSTEM_PYTHON} not found; apt-get install {RTSP_PACKAGES}"
    result = subprocess.run(
        [SYSTEM_PYTHON, __file__, "--check"], capture_output=True, text=True, timeout=30, check=False
    )
    if result.returncode != 0:
        why = (result.stdout + result.stderr).strip().splitlines()[-1:] or ["unknown error"]
        return f"GStreamer RTSP server unavailable ({why[0]}); apt-get install {RTSP_PACKAGES}"
    return None


def require_rtsp_server() -> None:
    """Skips the calling test when the server cannot run here; fails it instead under
    EDGE_ASSISTANT_REQUIRE_TOOLS=1 (CI installs the packages)."""
    import pytest

    missing = rtsp_server_missing()
    if missing is not None:
        if os.environ.get("EDGE_ASSISTANT_REQUIRE_TOOLS") == "1":
            pytest.fail(missing)
        pytest.skip(missing)


class RtspServer:
    """Serves ``video`` (H.264 in .mkv) at ``rtsp://127.0.0.1:PORT/<path>`` for each of ``paths``.

    A context manager: entering starts the server, leaving always kills it (its whole process group).
    ``port=None`` lets the server pick a free port on its first start; restarts keep that port.

    Args:
        video: an H.264 Matroska file (e.g. made by ``capture.synth.write_video(path.mkv, "libx264")``).
        port: TCP port for RTSP, or None for a free one.
        paths: the mount paths (without the leading slash), each an independent live stream.
        start_timeout_s: seconds to wait for the server to listen before failing.
    """

    def __init__(
        self, video: Path, port: int | None = None, paths: Sequence[str] = ("live",), start_timeout_s: float = 15.0
    ) -> None:
        if not paths:
            raise ValueError("paths must name at least one mount path, e.g. ('live',)")
        self.video = Path(video)
        self.port = port
        self.paths = tuple(p.strip("/") for p in paths)
        self.start_timeout_s = start_timeout_s
        self.starts = 0
        self._proc: subprocess.Popen[str] | None = None

    @property
    def url(self) -> str:
        """The URL of the first path."""
        return self.url_for(self.paths[0])

    def url_for(self, path: str) -> str:
        if self.port is None:
            raise RuntimeError("the server has not started yet: its port is not known")
        if path.strip("/") not in self.paths:
            raise ValueError(f"unknown path {path!r}; this server serves {self.paths}")
        return f"rtsp://127.0.0.1:{self.port}/{path.strip('/')}"

    @property
    def running(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    def start(self) -> None:
        """Start the server and wait until it listens; raises RuntimeError with its stderr if it cannot."""
        if self.running:
            raise RuntimeError(f"the RTSP server on port {self.port} is already running")
        if not self.video.is_file():
            raise FileNotFoundError(f"no video to serve at {self.video}")
        args = [SYSTEM_PYTHON, __file__, "--port", str(self.port or 0), "--video", str(self.video)]
        args += ["--parent", str(os.getpid())]
        args += [arg for path in self.paths for arg in ("--path", path)]
        with tempfile.TemporaryFile("w+") as errors:
            self._proc = subprocess.Popen(
                args, stdout=subprocess.PIPE, stderr=errors, stdin=subprocess.DEVNULL, text=True, start_new_session=True
            )
            line = self._read_ready_line()
            if not line.startswith("ready "):
                self.stop()
                errors.seek(0)
                raise RuntimeError(f"the RTSP server did not start ({line.strip() or 'no answer'}): {errors.read()}")
        self.port = int(line.split()[1])
        self.starts += 1

    def _read_ready_line(self) -> str:
        """The server's first stdout line, or '' at a timeout or when it exits first."""
        assert self._proc is not None and self._proc.stdout is not None
        with selectors.DefaultSelector() as sel:
            sel.register(self._proc.stdout, selectors.EVENT_READ)
            if not sel.select(self.start_timeout_s):
                return ""
        return self._proc.stdout.readline()

    def stop(self) -> None:
        """Kill the server abruptly (SIGKILL to its process group, like a crash); idempotent."""
        if self._proc is None:
            return
        try:
            os.killpg(self._proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass  # already gone
        self._proc.wait(10)
        if self._proc.stdout is not None:
            self._proc.stdout.close()
        self._proc = None

    def restart(self, down_s: float = 0.0) -> None:
        """Kill the server, leave the port closed for ``down_s`` seconds, start it again on the same port."""
        self.stop()
        time.sleep(down_s)
        self.start()

    def __enter__(self) -> RtspServer:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


# ----- server side: run by the system python3 with GStreamer's introspection bindings -----


def _die_with_parent(parent: int) -> None:
    """Ask Linux to kill this process when its parent dies (a killed test run leaves no server)."""
    import ctypes

    pr_set_pdeathsig = 1
    ctypes.CDLL(None).prctl(pr_set_pdeathsig, signal.SIGKILL)
    if os.getppid() != parent:  # the parent died before prctl
        os._exit(1)


def _load_gstreamer():
    import gi

    gi.require_version("Gst", "1.0")
    gi.require_version("GstRtspServer", "1.0")
    from gi.repository import GLib, Gst, GstRtspServer

    Gst.init(None)
    missing = [name for name in _ELEMENTS if Gst.ElementFactory.find(name) is None]
    if missing:
        raise RuntimeError(f"GStreamer elements missing: {', '.join(missing)}")
    return GLib, GstRtspServer


def _serve(port: int, video: str, paths: list[str]) -> None:
    GLib, GstRtspServer = _load_gstreamer()
    server = GstRtspServer.RTSPServer()
    server.set_address("127.0.0.1")
    server.set_service(str(port))
    mounts = server.get_mount_points()
    for path in paths:
        factory = GstRtspServer.RTSPMediaFactory()
        # SPS/PPS go in the SDP only: config-interval=-1 repeats them before every slice of a keyframe
        # (x264 writes several with threads), and FFmpeg then splits the frame in two and decodes garbage
        factory.set_launch(f'( filesrc location="{video}" ! matroskademux ! rtph264pay name=pay0 pt=96 )')
        mounts.add_factory(f"/{path}", factory)
    if server.attach(None) == 0:
        raise RuntimeError(f"cannot listen on 127.0.0.1:{port}")
    print(f"ready {server.get_bound_port()}", flush=True)
    GLib.MainLoop().run()


def _main(argv: list[str]) -> None:
    import argparse

    parser = argparse.ArgumentParser(description="RTSP server for the capture tests (GStreamer).")
    parser.add_argument("--check", action="store_true", help="only check that GStreamer's RTSP server loads")
    parser.add_argument("--port", type=int, default=0, help="TCP port; 0 picks a free one")
    parser.add_argument("--video", help="H.264 .mkv file to serve")
    parser.add_argument("--path", action="append", default=[], help="mount path (repeatable)")
    parser.add_argument("--parent", type=int, default=0, help="die with this process (its pid); 0: no")
    args = parser.parse_args(argv)
    if args.check:
        _load_gstreamer()
        return
    if args.parent:
        _die_with_parent(args.parent)
    _serve(args.port, args.video, args.path or ["live"])


if __name__ == "__main__":
    _main(sys.argv[1:])
