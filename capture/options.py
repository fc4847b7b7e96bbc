"""How sources picked while the assistant runs (the page, the terminal's +NAME=SOURCE) are captured."""

from __future__ import annotations

from dataclasses import dataclass

from capture.config import CaptureConfig, parse_source
from capture.policy import SourcePolicy


@dataclass(frozen=True)
class CaptureOptions:
    """How sources picked while running (the page, the terminal's +NAME=SOURCE) are captured (from --fps,
    --clip-seconds, --realtime, --loop) and which are allowed (policy: capture.policy; None allows any, for
    callers that are the operator)."""

    fps: float = 1.0
    clip_seconds: float = 4.0
    realtime: bool = True  # files play at their own speed, like a live stream
    loop: bool = False
    max_size: tuple[int, int] | None = None  # the model's frame size
    policy: SourcePolicy | None = None

    def config(self, source: str | int, uploaded: bool = False) -> CaptureConfig:
        """Raises ValueError for a source that cannot be a source (e.g. an unsupported URL scheme) or that the
        policy refuses (SourceRefused). uploaded: a file uploaded through the page. As for the command line's
        streams, a file read offline (realtime False) waits for the model and loses no clip."""
        connect_to = None
        if self.policy is not None:
            source, connect_to = self.policy.checked(source, uploaded=uploaded)
        return CaptureConfig(
            source=source,
            fps=self.fps,
            clip_seconds=self.clip_seconds,
            realtime=self.realtime,
            loop=self.loop and parse_source(source).kind == "file",  # --loop restarts files; streams go on
            max_size=self.max_size,
            block_when_full=not self.realtime,
            follow_redirects=self.policy is None,  # the policy checked this URL's host, not a redirect's
            connect_to=connect_to,  # the address the policy checked: not resolved again (DNS rebinding)
        )
