"""Watches set while running, applied on the model worker: a stream's watch list becomes its configured watches
plus the runtime ones that watch it. A watch whose spec did not change keeps its state (an alert that is on
stays on); one removed or changed while its alert is on ends it (an `alert` end with a `reason`), so MQTT and
Home Assistant never keep a state no watch will end. A `watch` event says when a watch begins to run on a stream
and when it ends there for good, so outputs make and remove what shows it (Home Assistant's entities)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from app.stream import Stream
from app.stream_events import StreamEvents
from bus import Alert, WatchEvent, WatchLifecycle
from watches.spec import WatchSpec
from watches.watch import Watch

STOPPED = "assistant stopped"  # the reason of the ends the assistant gives its open alerts when it stops
REMOVED = "stream removed"  # ... and a removed stream's open alerts
STREAM_STOPPED = "stream stopped"  # ... and a stopped stream's (its capture closed: no clip will end them)


def apply_runtime_watches(
    stream: Stream,
    before: Sequence[WatchSpec],
    after: Sequence[WatchSpec],
    events: StreamEvents,
    reasons: dict[str, str] | None = None,
    owners: Mapping[str, str] | None = None,
) -> None:
    """Replaces the runtime watches `before` by `after` on `stream` (the worker's thread only). reasons: why a
    watch went, by name, for its alert's end (default "removed", or "changed" when it comes back changed).
    owners: who set each new watch, by name (its checks take turns with other owners')."""
    old = {spec.name for spec in before}
    wanted = {spec.name: spec for spec in after if spec.watches(stream.name)}
    kept: list[Watch] = []
    for watch in stream.watches:
        name = watch.spec.name
        if name not in old:
            kept.append(watch)  # a configured watch
        elif wanted.get(name) == watch.spec:
            kept.append(watch)
            del wanted[name]
        else:
            reason = (reasons or {}).get(name) or ("changed" if name in wanted else "removed")
            if watch.state.on:
                end_alert(stream, watch, reason, events)
            if name not in wanted:
                events.publish(WatchEvent, stream, alert=name, change=WatchLifecycle.ENDED, reason=reason)
    for spec in wanted.values():
        kept.append(Watch(spec, stream.name, runtime=True, owner=(owners or {}).get(spec.name, "")))
        events.publish(WatchEvent, stream, alert=spec.name, change=WatchLifecycle.SET)
    stream.watches = kept


def end_open_alerts(stream: Stream, reason: str, events: StreamEvents) -> None:
    """The `alert` end of every watch of `stream` whose alert is on (the assistant stops: no check will end it)."""
    for watch in stream.watches:
        if watch.state.on:
            end_alert(stream, watch, reason, events)


def end_alert(stream: Stream, watch: Watch, reason: str, events: StreamEvents) -> None:
    """The `alert` end of a watch whose alert is on and that goes away (removed, changed, one-shot, expired, the
    assistant stopped)."""
    state = watch.state
    duration = max(stream.stream_time - state.began_at, 0.0)
    state.on, state.run = False, 0
    events.publish(
        Alert,
        stream,
        id=state.id or f"{stream.name}-{watch.spec.name}",
        alert=watch.spec.name,
        state="end",
        stream_time=round(stream.stream_time, 3),
        question=watch.spec.question,
        duration_s=round(duration, 3),
        reason=reason,
    )
