"""Watch checks after a clip are bounded (audit T1: 128 runtime watches with long questions every second slowed the
video to a clip a minute): at most --watch-checks-per-clip checks and --watch-check-share of the clip's duration;
what is left is owed to the next clips, configured watches first, then the runtime ones that waited longest, so
every due check still runs, later. On a fake session whose check costs a set time (its Verdict's ms): no model."""

from __future__ import annotations

import numpy as np
import pytest

from app.stream import Stream
from app.stream_events import StreamEvents
from app.watch_checks import CheckBudget, run_checks
from bus import Check, EventBus
from bus.input_limits import InputLimits
from capture import Clip
from model.verdict import Verdict
from watches.scheduler import StandingQuestion
from watches.spec import WatchSpec
from watches.watch import Watch

CLIP_S = 4.0


class CostlySession:
    """A session whose every check takes `ms` milliseconds and answers no."""

    def __init__(self, ms: float) -> None:
        self.ms = ms
        self.asked: list[str] = []

    def check(self, question: str) -> Verdict:
        self.asked.append(question)
        return Verdict(0.0, self.ms, 10)


def stream_with(configured: int, runtime: int, ms: float) -> Stream:
    stream = Stream("door", CostlySession(ms), StandingQuestion(every_s=0))
    specs = [(WatchSpec(f"c{i}", f"Is config thing {i} there?", every=1.0), False) for i in range(configured)]
    specs += [(WatchSpec(f"r{i}", f"Is runtime thing {i} there?", every=1.0), True) for i in range(runtime)]
    stream.watches = [Watch(spec, "door", runtime=runtime) for spec, runtime in specs]
    return stream


def clips(count: int):
    frames = np.zeros((4, 8, 8, 3), np.uint8)
    for i in range(count):
        yield Clip(frames, [i * CLIP_S + k for k in range(4)], i * CLIP_S, (i + 1) * CLIP_S, i)


def checked_per_clip(stream: Stream, count: int, budget: CheckBudget) -> list[list[str]]:
    bus, seen = EventBus(), []
    bus.subscribe(lambda e: seen.append(e.alert) if isinstance(e, Check) else None)
    per_clip = []
    for clip in clips(count):
        before = len(seen)
        run_checks(stream, clip, StreamEvents(bus), budget=budget)
        per_clip.append(seen[before:])
    return per_clip


def test_a_flood_of_runtime_watches_is_checked_a_few_per_clip_and_every_one_in_turn():
    """128 runtime watches due after every clip, 8 checks a clip: each clip runs 8, the first 16 clips check each
    watch once (the longest waiting first, none twice before all had one), and the video's clip never waits
    for more than the 8."""
    stream = stream_with(0, 128, ms=5.0)
    per_clip = checked_per_clip(stream, 32, CheckBudget(checks=8))
    assert [len(names) for names in per_clip] == [8] * 32
    first_round = [name for names in per_clip[:16] for name in names]
    assert sorted(first_round) == sorted(f"r{i}" for i in range(128))
    assert first_round[:8] == [f"r{i}" for i in range(8)]  # all owed since the same clip: in the stream's order
    assert sorted(name for names in per_clip[16:] for name in names) == sorted(first_round)  # the next round
    owed = [w.spec.name for w in stream.watches if w.owed_since is not None]
    assert sorted(owed) == sorted(set(owed) - set(per_clip[-1])) and len(owed) == 120  # all but the last 8 checked


def test_the_time_share_ends_a_clips_checks_and_the_first_check_always_runs():
    """Checks of 300 ms against 1,000 ms a clip (0.25 of a 4-s clip, one stream): 4 a clip (the fourth one starts
    within the share). A check dearer than the whole share still runs, one a clip: the watch is slow, not dead."""
    limits = InputLimits()
    budget = CheckBudget(limits.checks_per_clip, limits.check_budget_ms(CLIP_S, streams=1))
    assert budget.ms == pytest.approx(1000.0)
    assert [len(n) for n in checked_per_clip(stream_with(0, 10, ms=300.0), 3, budget)] == [4, 4, 4]
    assert [len(n) for n in checked_per_clip(stream_with(0, 3, ms=5000.0), 3, budget)] == [1, 1, 1]
    assert limits.check_budget_ms(CLIP_S, streams=4) == pytest.approx(250.0)  # four streams share the model


def test_configured_watches_are_never_late_because_of_runtime_ones():
    """Two configured watches and 40 runtime ones, 4 checks a clip: the configured two run after every clip."""
    stream = stream_with(2, 40, ms=1.0)
    per_clip = checked_per_clip(stream, 12, CheckBudget(checks=4))
    assert all(names[:2] == ["c0", "c1"] and len(names) == 4 for names in per_clip)


def test_within_the_budget_every_due_watch_is_checked_after_its_clip():
    """What was before the budget: few watches, each checked after every clip it is due at."""
    stream = stream_with(1, 2, ms=1.0)
    assert checked_per_clip(stream, 3, CheckBudget(checks=8)) == [["c0", "r0", "r1"]] * 3
    assert all(w.owed_since is None for w in stream.watches)


def test_owners_take_turns_so_one_owners_many_watches_never_hold_back_anothers():
    """One token's 64 watches owed since the first clip, another's single watch set after the fourth: with 8 checks
    a clip it runs after every clip from then on (it waited less than any of the 64, so by waiting alone it would
    come after all of them: 8 clips later), while the 64 still each get their turn."""
    stream = stream_with(0, 64, ms=1.0)
    for watch in stream.watches:
        watch.owner = "flood"
    bus, seen = EventBus(), []
    bus.subscribe(lambda e: seen.append(e.alert) if isinstance(e, Check) else None)
    per_clip = []
    for clip in clips(24):
        if clip.index == 4:
            late = Watch(WatchSpec("phone", "Is the door open?", every=1.0), "door", runtime=True, owner="phone")
            stream.watches.append(late)
        before = len(seen)
        run_checks(stream, clip, StreamEvents(bus), budget=CheckBudget(checks=8))
        per_clip.append(seen[before:])
    assert all("phone" in names for names in per_clip[4:]), per_clip[4:]
    flood = [name for names in per_clip for name in names if name != "phone"]
    assert set(flood) == {f"r{i}" for i in range(64)}  # every one of the 64 was checked too
    assert all(len(names) == 8 for names in per_clip)


@pytest.mark.parametrize(
    "settings, message",
    [
        ({"checks_per_clip": 0}, "checks_per_clip must be a whole number from 1 to 1000"),
        ({"check_share": 0.0}, "--watch-check-share) must be from 0.01 to 1"),
        ({"check_share": True}, "--watch-check-share) must be from 0.01 to 1"),
    ],
)
def test_a_bad_budget_is_refused_with_its_range(settings, message):
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace(")", r"\)")):
        InputLimits(**settings)
