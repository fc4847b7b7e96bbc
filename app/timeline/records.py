"""What the timeline keeps of each event: pure functions from an event (see app/assistant.py) to a `Row`."""

from __future__ import annotations

import json
from typing import Any

from app.timeline.store import Row

Event = dict[str, Any]
STREAM_EVENT_TYPES = frozenset({"status", "capture", "error", "end"})
OWN_ERROR_WHERE = "timeline"  # the writer's own error events are not written back into the timeline


def answer_span(event: Event, previous_end: float) -> tuple[float, float]:
    """The stream-time span (seconds) an answer covers, ending at the answer's stream time: from the earliest
    clip of this run it cites (recall, attention; timeline notes may be of another run, whose stream times
    mean nothing here), else from the stream's previous answer (`previous_end`, 0 after a reset)."""
    stream, end = event.get("stream"), float(event.get("stream_time") or 0.0)
    cited = [
        item
        for item in event.get("evidence") or ()
        if isinstance(item, dict) and item.get("stream") == stream and item.get("source") != "timeline"
    ]
    starts = [float(item["start"]) for item in cited if "start" in item]
    if starts:
        return min(min(starts), end), end
    return (previous_end if previous_end <= end else 0.0), end


def answer_row(event: Event, previous_end: float, thumbnail: bytes | None) -> Row:
    start, end = answer_span(event, previous_end)
    evidence = event.get("evidence")
    return Row(
        kind="answer",
        t_wall=float(event["t_wall"]),
        stream=event.get("stream"),
        start_s=start,
        end_s=end,
        question=event.get("question"),
        text=event.get("answer"),
        who="standing" if event.get("auto") else "person",
        round=event.get("round"),
        evidence=json.dumps(evidence, default=str) if evidence else None,
        thumbnail=thumbnail,
    )


def alert_row(event: Event, thumbnail: bytes | None) -> Row:
    end = float(event.get("stream_time") or 0.0)
    duration = event.get("duration_s")
    began = event.get("state") == "begin"
    text = f"{event.get('alert')} began" if began else f"{event.get('alert')} ended after {duration or 0:.0f} s"
    return Row(
        kind="alert",
        t_wall=float(event["t_wall"]),
        stream=event.get("stream"),
        start_s=end - float(duration) if duration is not None else end,
        end_s=end,
        question=event.get("question"),
        text=text,
        who="watch",
        p_yes=event.get("p_yes"),
        alert=event.get("alert"),
        alert_id=event.get("id"),
        state=event.get("state"),
        duration_s=duration,
        thumbnail=thumbnail,
    )


def stream_state(event: Event) -> str:
    """start | stop | status | error | end | the capture event's kind (reconnect, ...)."""
    kind, message = event["type"], str(event.get("message") or "")
    if kind == "status":
        if message.startswith("watching "):
            return "start"
        return "stop" if message == "stream stopped" else "status"
    if kind == "capture":
        return str(event.get("kind") or "capture")
    return kind


def stream_row(event: Event) -> Row | None:
    """A stream's start/stop/error/end row; None for events that are not about one stream, and for the
    timeline's own errors."""
    if event.get("stream") is None or event["type"] not in STREAM_EVENT_TYPES:
        return None
    if event["type"] == "error" and event.get("where") == OWN_ERROR_WHERE:
        return None
    message = str(event.get("message") or event.get("reason") or "")
    if event["type"] == "error" and event.get("where"):
        message = f"{event['where']}: {message}"
    stream_time = event.get("stream_time")
    return Row(
        kind="stream",
        t_wall=float(event["t_wall"]),
        stream=event["stream"],
        start_s=stream_time,
        end_s=stream_time,
        text=message,
        state=stream_state(event),
    )
