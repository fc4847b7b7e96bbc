"""A stream's watches at work on the model worker: the checks that fell due after a clip, and their alerts."""

from __future__ import annotations

import logging
import time

from app.stream import Stream
from app.stream_events import StreamEvents
from bus import Alert, Check
from capture import Clip
from watches.state import Transition
from watches.watch import Watch, snapshot_jpeg

logger = logging.getLogger(__name__)


def run_checks(stream: Stream, clip: Clip, events: StreamEvents, changed: bool = True) -> None:
    """The stream's watches due at this clip's end: a yes/no check each (the cache unchanged, a `check`
    event), then an `alert` event where one begins or ends. A failed check is an error event; the rest go on.
    changed: whether the clip brought change (watches.gate.clip_changed); a watch with `on_change` skips
    its due check when no clip did since its last check and its alert is settled (watches.gate; counted:
    `skipped_checks` in the next check event)."""
    for watch in stream.watches:
        watch.gate.saw_clip(changed)
        if watch.schedule.due(clip.t_end) is None or not watch.gate.admit(watch.state.settled):
            continue
        try:
            verdict = stream.session.check(watch.spec.question)
        except Exception as err:  # a failed check is reported; the watch and the stream go on
            logger.exception("%s: check %s failed", stream.name, watch.spec.name)
            events.error(stream, "watch", f"check {watch.spec.name!r} failed: {err}")
            watch.gate.failed()
            continue
        events.publish(
            Check,
            stream,
            alert=watch.spec.name,
            p_yes=round(verdict.p_yes, 4),
            ms=round(verdict.ms, 2),
            stream_time=round(clip.t_end, 3),
            skipped_checks=watch.gate.skipped,
        )
        change = watch.state.update(verdict.p_yes, clip.t_end, time.time())
        if change is not None:
            publish_alert(stream, watch, change, clip, events)


def publish_alert(stream: Stream, watch: Watch, change: Transition, clip: Clip, events: StreamEvents) -> None:
    """The `alert` event: a JPEG snapshot of the clip's last frame at the begin, the duration at the end."""
    fields = {"id": change.id, "alert": watch.spec.name, "state": change.state, "p_yes": round(change.p_yes, 4)}
    fields |= {"stream_time": round(change.stream_time, 3), "question": watch.spec.question}
    if change.state == "begin":
        jpeg = snapshot_jpeg(clip.frames[-1])
        fields |= {"snapshot": jpeg, "snapshot_bytes": len(jpeg)}
    else:
        fields["duration_s"] = round(change.duration_s, 3)
    events.publish(Alert, stream, **fields)
