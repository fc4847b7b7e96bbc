"""What the timeline keeps of each event: pure functions from a typed event (`bus.events`) to a `Row`."""

from __future__ import annotations

import json

from bus import Alert, Answer, CaptureChange, End, ErrorEvent, Event, Status, StatusKind
from bus.receipt import key_of
from bus.records import evidence_record
from timeline.store import Row

STREAM_EVENT_TYPES = (Status, CaptureChange, ErrorEvent, End)  # kept when they name a stream
OWN_ERROR_WHERE = "timeline"  # the writer's own error events are not written back into the timeline


def answer_span(event: Answer, previous_end: float) -> tuple[float, float]:
    """The stream-time span (seconds) an answer covers, ending at the answer's stream time: from the earliest
    clip of this run it cites (recall, attention; timeline notes may be of another run, whose stream times
    mean nothing here), else from the stream's previous answer (`previous_end`, 0 after a reset)."""
    stream, end = event.stream, float(event.stream_time or 0.0)
    starts = [span.start for span in event.evidence if span.stream == stream and span.source != "timeline"]
    if starts:
        return min(min(starts), end), end
    return (previous_end if previous_end <= end else 0.0), end


def answer_row(event: Answer, previous_end: float, thumbnail: bytes | None) -> Row:
    start, end = answer_span(event, previous_end)
    return Row(
        kind="answer",
        t_wall=float(event.t_wall),
        stream=event.stream,
        start_s=start,
        end_s=end,
        question=event.question,
        text=event.answer,
        who="standing" if event.auto else "person",
        round=event.round,
        evidence=json.dumps([evidence_record(span) for span in event.evidence]) if event.evidence else None,
        event_key=key_of(event),
        thumbnail=thumbnail,
    )


def alert_row(event: Alert, thumbnail: bytes | None) -> Row:
    end = float(event.stream_time or 0.0)
    duration = event.duration_s
    text = f"{event.alert} began" if event.began else f"{event.alert} ended after {duration or 0:.0f} s"
    text += f" ({event.reason})" if event.reason else ""  # an end its watch did not decide (host lost, stopped)
    return Row(
        kind="alert",
        t_wall=float(event.t_wall),
        stream=event.stream,
        start_s=end - float(duration) if duration is not None else end,
        end_s=end,
        question=event.question,
        text=text,
        who="watch",
        p_yes=event.p_yes,
        alert=event.alert,
        alert_id=event.id,
        state=event.state,
        duration_s=duration,
        event_key=key_of(event),
        thumbnail=thumbnail,
    )


def stream_state(event: Event) -> str:
    """start | stop | status | error | end | the capture event's kind (reconnect, ...)."""
    match event:
        case Status(kind=StatusKind.STREAM_WATCHING):
            return "start"
        case Status(kind=StatusKind.STREAM_STOPPED):
            return "stop"
        case Status():
            return "status"
        case CaptureChange(kind=kind):
            return str(kind or "capture")
    return event.TYPE


def stream_row(event: Event) -> Row | None:
    """A stream's start/stop/error/end row; None for events that are not about one stream, and for the
    timeline's own errors."""
    if event.stream is None or not isinstance(event, STREAM_EVENT_TYPES):
        return None
    if isinstance(event, ErrorEvent) and event.where == OWN_ERROR_WHERE:
        return None
    message = str(getattr(event, "message", "") or getattr(event, "reason", "") or "")
    if isinstance(event, ErrorEvent) and event.where:
        message = f"{event.where}: {message}"
    stream_time = getattr(event, "stream_time", None)
    return Row(
        kind="stream",
        t_wall=float(event.t_wall),
        stream=event.stream,
        start_s=stream_time,
        end_s=stream_time,
        text=message,
        state=stream_state(event),
    )
