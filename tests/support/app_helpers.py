"""Shared pieces of the app tests: generated videos, running `python -m app`, reading its event log."""

from __future__ import annotations

import functools
import itertools
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import bus
from bus import Event
from capture.synth import write_video

REPO = Path(__file__).resolve().parents[2]


@functools.cache
def video(seconds: float, size: tuple[int, int] = (96, 64), fps: float = 2.0) -> Path:
    """A generated H.264 video (cached per session in a temp folder)."""
    folder = Path(os.environ.get("PYTEST_APP_VIDEOS", "/tmp/edge-assistant-test-videos"))
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"stream_{int(seconds)}s_{size[0]}x{size[1]}_{fps:g}fps.mp4"
    if not path.exists():
        tmp = path.with_suffix(f".{os.getpid()}.part.mp4")  # pytest-xdist's workers may each be writing it
        write_video(tmp, size=size, fps=fps, duration_s=seconds, scene_seconds=30.0, options={"preset": "ultrafast"})
        tmp.replace(path)  # atomic: a reader sees the whole video or none
    return path


_TIMELINES = itertools.count()


def app_command(*args: str) -> list[str]:
    """`python -m app ARGS`; a run that names no --timeline gets a fresh one in a temporary folder, so tests never
    write the user's timeline (nor each other's)."""
    if "--timeline" not in args and (not args or args[0] != "history"):
        folder = Path(tempfile.gettempdir()) / f"edge-assistant-test-timelines-{os.getpid()}"
        args = (*args, "--timeline", str(folder / f"run-{next(_TIMELINES)}.sqlite"))
    return [sys.executable, "-m", "app", *args]


def run_app(
    *args: str, timeout: float = 300, stdin: str | None = None, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess:
    return subprocess.run(
        app_command(*args),
        cwd=REPO,
        input=stdin,
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**os.environ, "PYTHONUNBUFFERED": "1", **(env or {})},
    )


def read_log(path: Path) -> list[Event]:
    """The events of a --log-jsonl file, read back through `bus.records` (every line must be a known record)."""
    return list(bus.read_log(path))


def of_type(events: list[Event], kind: str) -> list[Event]:
    return [e for e in events if e.TYPE == kind]
