"""Server-Sent Events framing."""

from __future__ import annotations

import json
from typing import Any

KEEPALIVE_S = 15.0
SSE_HEADERS = {"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}


def sse(data: Any, event: str | None = None, id: int | str | None = None) -> str:
    """One event: `data` (a str as is, anything else as JSON), with its event name and id when given."""
    text = data if isinstance(data, str) else json.dumps(data, ensure_ascii=False, default=str)
    head = (f"id: {id}\n" if id is not None else "") + (f"event: {event}\n" if event else "")
    return head + "".join(f"data: {line}\n" for line in text.split("\n")) + "\n"


KEEPALIVE = ": keepalive\n\n"
