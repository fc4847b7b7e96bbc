"""The standing question's timing, and the event log's format."""

import json

import numpy as np
import pytest

from bus import EventBus
from outputs.event_log import JsonlLog
from tests.support.event_helpers import make_event
from watches.scheduler import StandingQuestion


def test_question_due_at_each_multiple_of_the_interval():
    schedule = StandingQuestion("what now?", every_s=20)
    clip_ends = [4.0 * i for i in range(1, 151)]  # 10 minutes of 4-second clips
    asked_at = [t for t in clip_ends if schedule.due(t)]
    assert asked_at == [20.0 * k for k in range(1, 31)]


def test_missed_slots_are_not_replayed():
    schedule = StandingQuestion("q", every_s=10)
    assert schedule.due(35.0) == "q"  # one question for the slots at 10, 20 and 30
    assert schedule.due(39.0) is None
    assert schedule.due(40.0) == "q"


def test_zero_interval_disables_and_bad_values_raise():
    assert StandingQuestion("q", every_s=0).due(1e6) is None
    with pytest.raises(ValueError, match="every must be >= 0"):
        StandingQuestion("q", every_s=-1)
    schedule = StandingQuestion("q", every_s=10)
    with pytest.raises(ValueError, match="must not be empty"):
        schedule.update(question="   ")
    assert schedule.question == "q"  # a rejected edit changes nothing


def test_update_moves_the_next_question():
    schedule = StandingQuestion("q", every_s=30)
    schedule.update(question="new?", every_s=5, now_s=12.0)
    assert schedule.due(16.0) is None
    assert schedule.due(17.0) == "new?"


def test_jsonl_log_writes_one_flushed_object_per_logged_event(tmp_path):
    path = tmp_path / "run.jsonl"
    log = JsonlLog(path)
    bus = EventBus()
    bus.subscribe(log)
    bus.publish(make_event("clip", index=1, stream_time=4.0, preview=np.zeros((2, 2, 3), np.uint8)))
    bus.publish(make_event("answer_piece", round=1, text="he"))  # live-only, not logged
    bus.publish(make_event("answer", round=1, answer="hello"))
    lines = path.read_text().splitlines()  # readable before close: flushed per event
    records = [json.loads(line) for line in lines]
    assert [r["type"] for r in records] == ["clip", "answer"]
    assert all(isinstance(r["t_wall"], float) for r in records)
    assert "preview" not in records[0]
    log.close()


def test_a_failing_subscriber_does_not_stop_the_others():
    seen = []
    bus = EventBus()

    def broken(event):
        raise RuntimeError("display crashed")

    bus.subscribe(broken)
    bus.subscribe(seen.append)
    bus.publish(make_event("status", message="hi"))
    assert [e.message for e in seen] == ["hi"]
