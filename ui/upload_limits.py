"""Uploads bounded while the page runs (an ASGI middleware in front of Gradio's upload route): video files only
(by extension), at most `max_files` files and `max_total_bytes` in all per run; Gradio itself refuses a file
over the per-file limit (`max_file_size`). A refused upload leaves no file behind and the answer says why and
which flag sets the limit.

Bytes are counted as they arrive (all uploads in flight together), so a request is cut off once the run's total
would be passed, before it is written out whole (through Gradio's own "too large" path, which deletes the files
it began); the type and the count are checked on the files Gradio saved, which are then deleted if refused.
"""

from __future__ import annotations

import asyncio
import json
import logging
from dataclasses import dataclass
from pathlib import Path

from gradio.route_utils import MultiPartException

from ui.controls import VIDEO_EXTENSIONS  # what the page's upload box offers and Start accepts

logger = logging.getLogger(__name__)

UPLOAD_PATHS = ("/gradio_api/upload", "/gradio_api/upload/")
MULTIPART_SLACK = 64 * 1024  # a request's bytes beyond its files' (boundaries, part headers)


@dataclass(frozen=True)
class UploadLimits:
    """max_files: uploads accepted per run; max_total_bytes: their bytes together (--max-uploads,
    --max-upload-total-mb)."""

    max_files: int = 20
    max_total_bytes: int = 2000 * 2**20


async def _answer(send, status: int, message: str) -> None:
    body = message.encode()
    headers = [(b"content-type", b"text/plain; charset=utf-8"), (b"content-length", str(len(body)).encode())]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


def _delete(paths: list[str]) -> None:
    for path in paths:
        Path(path).unlink(missing_ok=True)


class UploadGuard:
    """ASGI middleware: `UploadGuard(app, limits=UploadLimits(...))`; counts what this run accepted."""

    def __init__(self, app, limits: UploadLimits) -> None:
        self.app = app
        self.limits = limits
        self.files = 0
        self.bytes = 0
        self.arriving = 0  # bytes of uploads in flight, not yet accepted or refused
        self._lock = asyncio.Lock()

    def _full(self) -> str | None:
        if self.files >= self.limits.max_files:
            return f"at most {self.limits.max_files} uploads per run (--max-uploads); restart to upload more"
        if self.bytes >= self.limits.max_total_bytes:
            return self._total_message()
        return None

    def _total_message(self) -> str:
        total = self.limits.max_total_bytes / 2**20
        return f"uploads of this run would pass {total:.0f} MiB in all (--max-upload-total-mb); restart to upload more"

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] != "http" or scope["method"] != "POST" or scope["path"] not in UPLOAD_PATHS:
            await self.app(scope, receive, send)
            return
        full = self._full()
        if full is not None:
            await _answer(send, 413, full)
            return
        counted = 0

        async def counting_receive():
            nonlocal counted
            message = await receive()
            if message["type"] == "http.request":
                size = len(message.get("body", b""))
                counted += size
                self.arriving += size
                if self.bytes + self.arriving > self.limits.max_total_bytes + MULTIPART_SLACK:
                    # Gradio's parser deletes the files it began and answers 413 with this message
                    raise MultiPartException(f"{self._total_message()} (the maximum allowed size)")
            return message

        start: dict = {}
        body = bytearray()

        async def keep(message) -> None:
            if message["type"] == "http.response.start":
                start.update(message)
            elif message["type"] == "http.response.body":
                body.extend(message.get("body", b""))

        try:
            await self.app(scope, counting_receive, keep)
        finally:
            self.arriving -= counted
        if start.get("status") != 200:
            await send(start)
            await send({"type": "http.response.body", "body": bytes(body)})
            return
        async with self._lock:
            problem, paths = self._check(bytes(body))
            if problem is None:
                self.files += len(paths)
                self.bytes += sum(Path(p).stat().st_size for p in paths)
        if problem is not None:
            _delete(paths)
            logger.info("refused an upload: %s", problem)
            await _answer(send, 415 if "not a video" in problem else 413, problem)
            return
        await send(start)
        await send({"type": "http.response.body", "body": bytes(body)})

    def _check(self, answer: bytes) -> tuple[str | None, list[str]]:
        """(why the saved files are refused or None, their paths) from Gradio's answer (a JSON list of paths)."""
        try:
            paths = [str(p) for p in json.loads(answer)]
        except (ValueError, TypeError):
            return "the upload could not be read back", []
        names = [Path(p).name for p in paths]
        others = [name for name in names if Path(name).suffix.lower() not in VIDEO_EXTENSIONS]
        if others:
            return f"{', '.join(others)}: not a video file; accepted: {', '.join(VIDEO_EXTENSIONS)}", paths
        if self.files + len(paths) > self.limits.max_files:
            left = self.limits.max_files - self.files
            return f"at most {self.limits.max_files} uploads per run (--max-uploads); {left} left", paths
        size = sum(Path(p).stat().st_size for p in paths if Path(p).exists())
        if self.bytes + size > self.limits.max_total_bytes:
            return self._total_message(), paths
        return None, paths
