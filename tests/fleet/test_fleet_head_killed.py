"""Nothing lost when the HEAD dies (issue 39): on a real Ray cluster on this machine, the head runs as the command line
does (`python -m app --ray ...`, the tiny model, a real broker, a webhook receiver and an SQLite timeline). While
the broker is frozen (SIGSTOP: nothing acknowledged) and the webhook receiver answers nothing, the head's outputs
fill with a burst of alerts and answers; the head is then killed with SIGKILL (Ray ends its host with it). A new
head on the same box and files delivers what the dead one had not: every alert and answer the first run's host
made (its spool, read after the kill) is in the timeline exactly once, by content and by its key, and reached the
broker and the webhook at least once (tests/support/head_kill.py runs the scenario)."""

from __future__ import annotations

import pytest

from tests.support.head_kill import head_kill

pytest.importorskip("ray")


def test_a_head_killed_with_events_in_its_outputs_loses_none_and_the_timeline_keeps_each_once(
    tmp_path, shared_ray_cluster
) -> None:
    run = head_kill(tmp_path, shared_ray_cluster.address)  # a head killed, not a node: the session's cluster serves
    assert run.made and set(run.made) - run.webhook_at_kill, "the webhook had every event at the kill: none at stake"
    assert not any(run.missing().values()), f"events the first run made never arrived: {run.missing()}"
    assert run.unacked & run.timeline_at_kill, "nothing in the timeline was unacknowledged at the kill: no repeat"
    repeated = sorted(i for i in run.made if run.timeline.count(i) != 1)
    assert not repeated, f"the timeline kept {len(repeated)} of {len(run.made)} events other than once: {repeated[:5]}"
    keys = [key for key in run.keys if key is not None]
    assert set(run.made.values()) <= set(keys) and len(keys) == len(set(keys)), "a spooled event's key missing or twice"
    begun = {i[1] for i in run.made if i[0] == "alert" and i[2] == "begin"}
    ended = {i[1] for i in run.timeline if i[0] == "alert" and i[2] == "end"}
    assert begun <= ended, f"alerts the dead run began and nothing ended: {sorted(begun - ended)}"  # "host lost"
    assert run.exit_code == 0 and "Traceback" not in run.output, run.output[-3000:]
