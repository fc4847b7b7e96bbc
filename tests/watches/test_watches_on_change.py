"""Watches checked only when their stream changed (`on_change`, issue 30): the gate over clips between checks,
what counts as a changed clip, and the option in flags and tables."""

import pytest

from app.cli import parse_args
from app.config import AppConfig
from capture.synth_camera import CameraVideoConfig, write_camera_video
from tests.support.app_helpers import of_type, read_log
from tests.support.in_process_main import run_app_here
from watches.gate import ChangeGate
from watches.spec import WatchSpec, parse_alert_flag, specs_from_table
from watches.state import WatchState


def checks_run(changes_per_check, on_change=True):
    """For each due check, the clips' `changed` since the previous one: which checks ran, and the skips."""
    gate = ChangeGate(on_change)
    ran = []
    for changes in changes_per_check:
        for changed in changes:
            gate.saw_clip(changed)
        ran.append(gate.admit())
    return ran, gate.skipped


def test_a_static_stream_is_checked_once_then_only_when_something_changed():
    static, moved = [False, False], [False, True]
    ran, skipped = checks_run([static, static, static, moved, static, moved, moved])
    assert ran == [True, False, False, True, False, True, True]
    assert skipped == 2 + 1


def test_change_between_skipped_checks_is_not_forgotten():
    # the change came two checks' worth of clips ago (while checks were skipped... then one was due)
    ran, _ = checks_run([[False], [True, False], [False]])
    assert ran == [True, True, False]


def test_an_alert_still_begins_and_ends_while_the_scene_holds_still():
    """A person walks in and stands still, later walks out and the scene is still again: the checks towards
    on_after and off_after run although nothing changed; settled, the watch skips again."""
    state, gate = WatchState("door-person", 0.5, on_after=2, off_after=2, cooldown=0.0), ChangeGate(True)
    script = [(True, 0.1), (False, 0.1), (True, 0.9), (False, 0.9), (False, 0.9), (True, 0.1), (False, 0.1)]
    script += [(False, 0.1)]  # (changed since the last due check, what the check would answer)
    ran, transitions = [], []
    for k, (changed, p_yes) in enumerate(script):
        gate.saw_clip(changed)
        ran.append(gate.admit(state.settled))
        if ran[-1]:
            change = state.update(p_yes, 10.0 * (k + 1), 1000.0 + k)
            transitions += [(change.state, change.stream_time)] if change else []
    assert ran == [True, False, True, True, False, True, True, False]
    assert transitions == [("begin", 40.0), ("end", 70.0)]


def test_a_failed_check_is_not_taken_for_a_checked_scene():
    gate = ChangeGate(True)
    assert gate.admit()
    gate.failed()
    assert gate.admit() and not gate.admit()


def test_without_on_change_every_due_check_runs():
    ran, skipped = checks_run([[False]] * 4, on_change=False)
    assert ran == [True] * 4 and skipped == 0


def test_on_change_in_flags_and_tables():
    assert parse_alert_flag("person=Is there a person?").on_change is False
    assert parse_alert_flag("person=Is there a person?", on_change=True) == WatchSpec(
        "person", "Is there a person?", on_change=True
    )
    (spec,) = specs_from_table({"gate": {"question": "Is the gate open?", "on_change": True}})
    assert spec.on_change is True
    with pytest.raises(ValueError, match="on_change must be true or false"):
        specs_from_table({"gate": {"question": "q", "on_change": "yes"}})
    with pytest.raises(ValueError, match="allowed: .*on_change"):
        specs_from_table({"gate": {"question": "q", "on_chnage": True}})


def test_alert_on_change_flag_sets_the_flag_watches_only(tmp_path):
    config = tmp_path / "alerts.toml"
    config.write_text('[alerts.gate]\nquestion = "Is the gate open?"\n')
    args = parse_args(["--video", "x.mp4", "--alert", "person=Is there a person?", "--alert-on-change"] + [
        "--config", str(config)
    ])  # fmt: skip
    watches = {w.name: w.on_change for w in AppConfig.from_args(args).watches}
    assert watches == {"person": True, "gate": False}  # the table says for itself
    top = tmp_path / "top.toml"
    top.write_text('alert_on_change = true\nalert = ["person=Is there a person?"]\n')
    config = AppConfig.from_args(parse_args(["--video", "x.mp4", "--config", str(top)]))
    assert [w.on_change for w in config.watches] == [True]


def test_the_app_checks_an_on_change_watch_only_while_the_camera_sees_change(tmp_path):
    """A fixed camera (a photo, sensor noise, drift, H.264) where a person crosses from 16 s to 28 s: the
    on_change watch is checked at the first clip and the one after (its alert's second yes of on_after = 2),
    then only around the crossing; a plain watch at every clip."""
    camera = tmp_path / "camera.mp4"
    config = CameraVideoConfig(
        size=(160, 120), fps=2.0, duration_s=40.0, object_enter_s=16.0, object_exit_s=28.0, object_size=0.5
    )
    write_camera_video(camera, config)
    alerts = tmp_path / "alerts.toml"
    alerts.write_text(
        '[alerts.moved]\nquestion = "Is anyone there?"\nthreshold = 0.0\nevery = 4\non_change = true\n'
        '[alerts.always]\nquestion = "Is anyone there?"\nthreshold = 0.0\nevery = 4\n'
    )
    log = tmp_path / "run.jsonl"
    done = run_app_here(
        "--video", str(camera), "--model", "tiny", "--no-realtime", "--every", "0", "--quiet",
        "--config", str(alerts), "--log-jsonl", str(log),
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    events = read_log(log)
    clips = of_type(events, "clip")
    assert [c.stream_time for c in clips] == [4.0 * k for k in range(1, 11)]
    checks = of_type(events, "check")
    assert [c.stream_time for c in checks if c.alert == "always"] == [4.0 * k for k in range(1, 11)]
    moved = [c for c in checks if c.alert == "moved"]
    times = [c.stream_time for c in moved]
    assert times[:2] == [4.0, 8.0]  # the first check always runs; the second confirms the alert's begin
    assert [(a.alert, a.state, a.stream_time) for a in of_type(events, "alert")] == [
        ("moved", "begin", 8.0),
        ("always", "begin", 8.0),
        ("moved", "end", 40.0),  # both still on at the video's end: ended as the assistant stops
        ("always", "end", 40.0),
    ]
    assert not {12.0, 16.0, 36.0, 40.0} & set(times)  # before and well after the crossing: skipped
    assert {20.0, 24.0, 28.0} <= set(times)  # the person is in view
    due = sum(c.stream_time <= times[-1] for c in clips)
    assert moved[-1].skipped_checks == due - len(moved)  # every skip counted
