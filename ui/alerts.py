"""The alerts the page shows, from the assistant's `alert` events. Pure: no Gradio, no locks (ui.state holds the
lock), no clock of its own.

An alert begins (with a JPEG snapshot of the stream's latest frame) and later ends (with its duration in stream
seconds), both events carrying the same id. `AlertBook` keeps the latest `MAX_ALERTS` of them, newest first,
and the ones still on (for the banner) apart: an alert on for longer than the list's bound stays in the banner.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, replace

from bus import Alert as AlertEvent
from bus import AlertState

MAX_ALERTS = 50  # alerts kept in the list, snapshots included (a snapshot is a JPEG of tens of kB)


@dataclass(frozen=True, eq=False)
class Alert:
    """One alert of one watch on one stream. Times: `*_time` in seconds of that stream, `*_wall` epoch seconds.
    p_yes: at the begin. snapshot: the begin frame as JPEG bytes (None when the event had none).
    closed_by: why it was closed without an end event ("the stream ended", ...), else None."""

    id: str
    stream: str
    alert: str
    question: str
    p_yes: float
    begin_time: float
    begin_wall: float
    snapshot: bytes | None = None
    end_time: float | None = None
    end_wall: float | None = None
    duration_s: float | None = None
    closed_by: str | None = None

    @property
    def ongoing(self) -> bool:
        return self.end_wall is None


class AlertBook:
    """The latest alerts, newest first, and those on now. Feed it `alert` events with `on_alert`."""

    def __init__(self, keep: int = MAX_ALERTS) -> None:
        if keep < 1:
            raise ValueError(f"keep must be >= 1 alerts, got {keep}")
        self._latest: deque[Alert] = deque(maxlen=keep)  # newest at the left
        self._active: dict[str, Alert] = {}  # by id, in order of begin

    @property
    def latest(self) -> tuple[Alert, ...]:
        """Newest first."""
        return tuple(self._latest)

    @property
    def active(self) -> tuple[Alert, ...]:
        """The alerts on now, oldest first."""
        return tuple(self._active.values())

    def on_alert(self, e: AlertEvent, stream: str) -> bool:
        """An `alert` event of `stream` (state "begin" or "end"); True when something shown changed."""
        if e.state is AlertState.BEGIN:
            snapshot = e.snapshot
            alert = Alert(
                id=str(e.id),
                stream=stream,
                alert=e.alert,
                question=e.question,
                p_yes=float(e.p_yes),
                begin_time=float(e.stream_time),
                begin_wall=float(e.t_wall),
                snapshot=bytes(snapshot) if isinstance(snapshot, (bytes, bytearray)) else None,
            )
            self._put(alert)
            return True
        if e.state is AlertState.END:
            began = self._find(str(e.id))
            if began is None:  # its begin is no longer kept (or never came): nothing shown to close
                return False
            self._put(
                replace(
                    began,
                    end_time=float(e.stream_time),
                    end_wall=float(e.t_wall),
                    duration_s=float(e.duration_s) if e.duration_s is not None else None,
                )
            )
            return True
        return False

    def close_stream(self, stream: str | None, why: str, t_wall: float) -> bool:
        """Closes the alerts on now of `stream` (None: of every stream), which will get no end event: the stream
        ended or the assistant stopped. True when one was closed."""
        closing = [a for a in self._active.values() if stream is None or a.stream == stream]
        for alert in closing:
            self._put(replace(alert, end_wall=t_wall, closed_by=why))
        return bool(closing)

    def _find(self, alert_id: str) -> Alert | None:
        return self._active.get(alert_id) or next((a for a in self._latest if a.id == alert_id), None)

    def _put(self, alert: Alert) -> None:
        """Adds `alert` (a new id) or replaces the kept one with its id; keeps `_active` in step."""
        index = next((i for i, a in enumerate(self._latest) if a.id == alert.id), None)
        if index is None:
            if alert.ongoing:  # a new alert; an old one on for longer than the list's bound is not added back
                self._latest.appendleft(alert)
        else:
            self._latest[index] = alert
        if alert.ongoing:
            self._active[alert.id] = alert
        else:
            self._active.pop(alert.id, None)
