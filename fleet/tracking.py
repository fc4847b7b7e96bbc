"""What the head learns from the hosts' events (pure; the coordinator's loop feeds it): the alerts that are on, the
streams that ended, the answers given. When a host is lost, its streams' open alerts end here, once each, with a
reason: the watch that raised them runs no more, and a new one starts with the stream on its new host."""

from __future__ import annotations

from dataclasses import dataclass, field

from bus import Alert, Answer, End, Event, Status, StatusKind

HOST_LOST = "host lost"


@dataclass
class FleetTracking:
    open_alerts: dict[str, dict[str, Alert]] = field(default_factory=dict)  # stream -> id -> the begin
    finished: set[str] = field(default_factory=set)  # streams whose source ended or reached --duration
    rounds: int = 0  # answers, the whole fleet
    stream_time: dict[str, float] = field(default_factory=dict)

    def saw(self, event: Event) -> None:
        stream = event.stream
        if stream is None:
            return
        match event:
            case Alert(state="begin"):
                self.open_alerts.setdefault(stream, {})[event.id] = event
            case Alert():
                self.open_alerts.get(stream, {}).pop(event.id, None)
            case Answer():
                self.rounds += 1
            case End():
                self.finished.add(stream)
            case Status(kind=StatusKind.DURATION_REACHED):
                self.finished.add(stream)
        time = getattr(event, "stream_time", None)
        if isinstance(time, (int, float)):
            self.stream_time[stream] = float(time)

    def end_alerts(self, stream: str, reason: str = HOST_LOST) -> list[Alert]:
        """The `end` of every alert of `stream` that is on (each once: they are forgotten here)."""
        return [self._end(begin, reason) for begin in self.open_alerts.pop(stream, {}).values()]

    def is_open(self, stream: str | None, alert_id: str) -> bool:
        return alert_id in self.open_alerts.get(stream or "", {})

    def end_alert(self, stream: str, alert_id: str, reason: str = HOST_LOST) -> Alert | None:
        """The `end` of one alert if it is on (then forgotten here), else None."""
        begin = self.open_alerts.get(stream, {}).pop(alert_id, None)
        return None if begin is None else self._end(begin, reason)

    def _end(self, begin: Alert, reason: str) -> Alert:
        return Alert(
            stream=begin.stream,
            id=begin.id,
            alert=begin.alert,
            state="end",
            p_yes=begin.p_yes,
            stream_time=self.stream_time.get(begin.stream or "", begin.stream_time),
            question=begin.question,
            reason=reason,
        )

    def restarted(self, stream: str) -> None:
        """The stream runs again (on a new host): its source starts over, so it has not ended."""
        self.finished.discard(stream)
