"""A stream's watches at work on the model worker: the checks that fell due after a clip, and their alerts."""

from __future__ import annotations

import logging
import math
import time
from dataclasses import dataclass

from app.stream import Stream
from app.stream_events import StreamEvents
from bus import Alert, Check
from capture import Clip
from watches.state import Transition
from watches.watch import Watch, snapshot_jpeg

logger = logging.getLogger(__name__)


def run_checks(
    stream: Stream,
    clip: Clip,
    events: StreamEvents,
    changed: bool = True,
    budget: CheckBudget | None = None,
) -> None:
    """The stream's watches due at this clip's end: a yes/no check each (the cache unchanged, a `check`
    event), then an `alert` event where one begins or ends. A failed check is an error event; the rest go on.
    changed: whether the clip brought change (watches.gate.clip_changed); a watch with `on_change` skips
    its due check when no clip did since its last check and its alert is settled (watches.gate; counted:
    `skipped_checks` in the next check event).

    budget: how many checks, and how many milliseconds of checks, this clip allows (audit T1: watches never slow
    the video). A due check beyond it is owed: it runs after a later clip, before the checks due then;
    configured watches go first, then runtime ones, their owners taking turns (each owner's longest waiting
    first: one owner's 64 watches never hold back another's), by how long they have waited (each is owed one
    check at most: a watch waiting for its check is not asked again). At least one check runs after every clip."""
    budget = budget or CheckBudget()
    due: list[Watch] = []
    for watch in stream.watches:
        watch.gate.saw_clip(changed)
        if watch.owed_since is None:
            if watch.schedule.due(clip.t_end) is None or not watch.gate.admit(watch.state.settled):
                continue
            watch.owed_since = clip.t_end
        due.append(watch)
    due = in_turn(due)
    done, spent_ms = 0, 0.0
    for watch in due:
        if done and (done >= budget.checks or spent_ms >= budget.ms):
            break  # the rest stay owed
        watch.owed_since = None
        done += 1
        started = time.perf_counter()
        try:
            verdict = stream.session.check(watch.spec.question)
        except Exception as err:  # a failed check is reported; the watch and the stream go on
            spent_ms += (time.perf_counter() - started) * 1000
            logger.exception("%s: check %s failed", stream.name, watch.spec.name)
            events.error(stream, "watch", f"check {watch.spec.name!r} failed: {err}")
            watch.gate.failed()
            continue
        spent_ms += verdict.ms
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


def in_turn(due: list[Watch]) -> list[Watch]:
    """The order the due checks run in: configured watches by how long they have waited, then the runtime ones in
    rounds, each owner's longest waiting watch in a round, the round by how long they have waited (stable: in
    the stream's order at equal keys)."""
    due = sorted(due, key=lambda w: (w.runtime, w.owed_since))
    turn: dict[str, int] = {}
    rounds = []
    for watch in due:
        rounds.append(turn.get(watch.owner, 0) if watch.runtime else 0)
        if watch.runtime:
            turn[watch.owner] = rounds[-1] + 1
    order = sorted(range(len(due)), key=lambda i: (due[i].runtime, rounds[i], due[i].owed_since, i))
    return [due[i] for i in order]


@dataclass(frozen=True)
class CheckBudget:
    """What one clip allows: `checks` checks and `ms` milliseconds of them (the first check always runs)."""

    checks: int = 1_000_000
    ms: float = math.inf


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
