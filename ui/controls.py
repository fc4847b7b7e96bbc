"""The page's buttons and text boxes as plain methods: each sends one command to the assistant and returns
a `Feedback` for the person who clicked. Bad input becomes a message; it never touches the running stream.

No Gradio here: the page (ui.page) turns a `Feedback` into a message in the clicking tab.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from bus.desk import Desk
from capture import SourceError
from capture.options import CaptureOptions
from ui.source_errors import page_source_error
from ui.state import LiveState

logger = logging.getLogger(__name__)

VIDEO_EXTENSIONS = (".mp4", ".m4v", ".mkv", ".webm", ".mov", ".avi", ".ts", ".mpg", ".mpeg", ".flv", ".ogv")
SOURCE_KINDS = ("file upload", "path or URL", "camera")
ALL_STREAMS = "all streams"  # the page's choice of sending a question to every stream
MAX_STREAMS = 8  # the page has a panel for at most this many streams; adding one more is refused
NOT_ASKED = "not asked: its stream had no host then (waiting to be placed); ask again once it runs"


@dataclass(frozen=True)
class Feedback:
    ok: bool
    message: str


def check_upload(path: str | None, max_bytes: int) -> str | None:
    """Why an uploaded file cannot be watched, or None if it may be tried."""
    if not path:
        return "no file uploaded yet: drop a video file in the upload box first"
    name = Path(path).name
    if Path(path).suffix.lower() not in VIDEO_EXTENSIONS:
        return f"'{name}' is not a video file; accepted: {', '.join(VIDEO_EXTENSIONS)}"
    try:
        size = os.path.getsize(path)
    except OSError as err:
        return f"the upload '{name}' cannot be read: {err.strerror or err}"
    if size > max_bytes:
        return f"'{name}' is {size / 2**20:.0f} MiB; the limit is {max_bytes / 2**20:.0f} MiB (--max-upload-mb)"
    return None


def parse_camera(value: float | int | str | None) -> int:
    """A camera index from the page's number box; ValueError if it is not a whole number >= 0."""
    try:
        number = float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        raise ValueError(f"the camera index must be a whole number >= 0, got {value!r}") from None
    if number < 0 or number != int(number):
        raise ValueError(f"the camera index must be a whole number >= 0, got {value!r}")
    return int(number)


def stream_choice(choice: str | None) -> str | None:
    """A stream's name from the page's selectors; None for "all streams" (or nothing chosen)."""
    return None if not choice or choice == ALL_STREAMS else choice


class Controls:
    """Commands from every browser tab. Thread-safe: Gradio runs handlers on worker threads.

    assistant: the running assistant's desk (bus.desk; one box or a fleet). `stream`: a stream's name; None is the
    first stream (for `ask`: every stream). streams: the streams' names (the first is the default; none given:
    those of `live`); the source buttons act on one of them; `add_stream` adds one."""

    def __init__(
        self,
        assistant: Desk,
        live: LiveState,
        options: CaptureOptions,
        max_upload_bytes: int,
        streams: tuple[str, ...] = (),
    ) -> None:
        self.assistant = assistant
        self.live = live
        self.options = options
        self.max_upload_bytes = max_upload_bytes
        self.streams = streams or tuple(view.name for view in live.snapshot().streams)
        self._ask_lock = threading.Lock()  # questions enter the chat in the order they enter the queue
        self._add_lock = threading.Lock()  # streams are added one at a time (the page's limit holds)

    def start(
        self,
        kind: str,
        upload: str | None,
        location: str | None,
        camera: float | int | None,
        stream: str | None = None,
    ) -> Feedback:
        """Watches the chosen source instead of the stream's current one (`stream`: a name, None = the first).
        A bad source leaves the current stream running."""
        target = stream_choice(stream)
        try:
            source = self._source(kind, upload, location, camera)
            self.assistant.watch(self.options.config(source, kind == "file upload"), stream=target)
        except SourceError as err:
            return self._refuse(f"cannot watch it: {page_source_error(kind, location, upload, str(err))}")
        except ValueError as err:
            return self._refuse(f"cannot watch it: {err}")
        if target is None or target == self._default():
            self.assistant.schedule.update(now_s=0.0)  # a new source's stream time starts at 0
        return Feedback(True, f"starting{self._on(target)}; the first frame appears after the first clip")

    def add_stream(
        self, name: str | None, kind: str, upload: str | None, location: str | None, camera: float | int | None
    ) -> Feedback:
        """Adds a stream named `name` watching the chosen source, next to the running ones; the message says
        the memory arithmetic with it. A refusal (a bad or taken name, a bad source, memory, more than
        MAX_STREAMS) changes nothing."""
        name = (name or "").strip()
        with self._add_lock:
            try:
                if len(self.streams) >= MAX_STREAMS:
                    raise ValueError(f"the page shows at most {MAX_STREAMS} streams (MAX_STREAMS in ui/controls.py)")
                if not name:
                    raise ValueError("type a name for the new stream first (e.g. door)")
                source = self._source(kind, upload, location, camera)
                admission = self.assistant.add_stream(name, self.options.config(source, kind == "file upload"))
            except SourceError as err:
                return self._refuse(
                    f"cannot add stream {name!r}: {page_source_error(kind, location, upload, str(err))}"
                )
            except ValueError as err:
                return self._refuse(f"cannot add stream {name!r}: {err}" if name else f"cannot add a stream: {err}")
            self.streams = (*self.streams, name)
        return Feedback(True, f"stream {name} added; memory: {admission}")

    def remove_stream(self, stream: str | None) -> Feedback:
        """Removes the chosen stream (not the first): its capture stops, its memory is freed, its panel goes."""
        target = stream_choice(stream)
        with self._add_lock:
            try:
                if target is None:
                    raise ValueError("choose the stream to remove first")
                self.assistant.remove_stream(target)
            except ValueError as err:
                return self._refuse(f"cannot remove stream {target!r}: {err}" if target else str(err))
            self.streams = tuple(name for name in self.streams if name != target)
        return Feedback(True, f"stream {target} removed; its memory is freed")

    def stop(self, stream: str | None = None) -> Feedback:
        target = stream_choice(stream)
        try:
            self.assistant.stop_stream(stream=target)
        except ValueError as err:
            return self._refuse(str(err))
        return Feedback(
            True, f"stream{self._on(target)} stopped; what was seen is still in memory, questions are still answered"
        )

    def reset(self, stream: str | None = None) -> Feedback:
        target = stream_choice(stream)
        try:
            self.assistant.reset(stream=target)
        except ValueError as err:
            return self._refuse(str(err))
        self.live.memory_reset(target)
        return Feedback(True, f"memory reset{self._on(target)}: the cache is empty; the stream goes on")

    def ask(self, question: str | None, stream: str | None = None) -> Feedback:
        """Asks one stream (its name) or every stream (None or "all streams"). A stream the assistant says it did
        not ask (a fleet's stream without a host) gets its turn marked so, not left queued."""
        text = (question or "").strip()
        if not text:
            return Feedback(False, "type a question about the stream first")
        try:
            text = self.assistant.check_question(text)  # a too long one never reaches the chat nor the queue
        except ValueError as err:
            return self._refuse(str(err))
        target = stream_choice(stream)
        with self._ask_lock:
            queued = self.live.question_queued(text, target)
            try:
                asked = self.assistant.ask(text, stream=target)
            except ValueError as err:
                self.live.question_refused(text, str(err), target)
                return self._refuse(str(err))
            skipped = [] if asked is None else [name for name in queued if name not in asked]
            for name in skipped:
                self.live.question_refused(text, NOT_ASKED, name)
        if skipped:
            return Feedback(True, f"not asked: {', '.join(skipped)} (no host then)")
        return Feedback(True, "")

    def set_standing(self, question: str | None, every_s: float | None) -> Feedback:
        """Changes the standing question and its interval; the next one is due one interval from now."""
        try:
            if every_s is None:
                raise ValueError("give the interval in seconds of stream time (0 = never)")
            if question and question.strip():  # asked every interval of every stream: as bounded as a question
                question = self.assistant.check_question(question)
            self.assistant.schedule.update(
                question=question or "", every_s=float(every_s), now_s=self.assistant.stream_time
            )
        except ValueError as err:
            return self._refuse(str(err))
        schedule = self.assistant.schedule
        if schedule.every_s == 0:
            return Feedback(True, "no standing question: only typed questions are answered")
        return Feedback(
            True, f"“{schedule.question}” every {schedule.every_s:g} s, next at t = {schedule.next_due_s:g} s"
        )

    def _source(self, kind: str, upload: str | None, location: str | None, camera: float | int | None) -> str | int:
        if kind == "file upload":
            problem = check_upload(upload, self.max_upload_bytes)
            if problem is not None:
                raise ValueError(problem)
            return str(upload)
        if kind == "path or URL":
            text = (location or "").strip()
            if not text:
                raise ValueError("type a video path or a stream URL first")
            return text
        if kind == "camera":
            return parse_camera(camera)
        raise ValueError(f"unknown source kind {kind!r}; choose one of {', '.join(SOURCE_KINDS)}")

    def _default(self) -> str | None:
        return self.streams[0] if self.streams else None

    def _on(self, target: str | None) -> str:
        """' on a' when the page has several streams."""
        name = target or self._default()
        return f" on {name}" if len(self.streams) > 1 and name else ""

    def _refuse(self, message: str) -> Feedback:
        logger.info("refused: %s", message)
        self.live.note("error", message, time.time())
        return Feedback(False, message)
