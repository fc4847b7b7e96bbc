"""A watch at work on one stream: when its next check is due, and its alert's state."""

from __future__ import annotations

import io

import numpy as np
from PIL import Image

from watches.gate import ChangeGate
from watches.scheduler import StandingQuestion
from watches.spec import WatchSpec
from watches.state import WatchState


class Watch:
    """`spec` on the stream `stream`: checked every `spec.every` seconds of that stream's time (with
    `spec.on_change`: only when the stream changed since the last check). runtime: set while running (the API,
    MQTT), not configured at start. owed_since: the stream time its due check has waited since, when the check
    budget of a clip left it for a later clip (app/watch_checks.py); None when no check is owed. owner: who set a
    runtime watch (the API token's name, "mqtt"; "" unknown): owners take turns for the checks a clip allows."""

    def __init__(self, spec: WatchSpec, stream: str, runtime: bool = False, owner: str = "") -> None:
        self.spec = spec
        self.runtime = runtime
        self.owner = owner
        self.owed_since: float | None = None
        self.schedule = StandingQuestion(spec.question, spec.every)
        self.gate = ChangeGate(spec.on_change)
        self.state = WatchState(f"{stream}-{spec.name}", spec.threshold, spec.on_after, spec.off_after, spec.cooldown)


def snapshot_jpeg(frame: np.ndarray, quality: int = 85) -> bytes:
    """A frame ([H, W, 3] uint8 RGB) as JPEG bytes."""
    out = io.BytesIO()
    Image.fromarray(frame).save(out, format="JPEG", quality=quality)
    return out.getvalue()
