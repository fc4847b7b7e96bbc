"""Watches checked only when their stream changed (`on_change`, issue 30): the gate over clips between checks,
what counts as a changed clip, and the option in flags and tables."""

import pytest

from app.cli import parse_args
from app.config import AppConfig
from app.watches.gate import ChangeGate, clip_changed
from app.watches.spec import WatchSpec, parse_alert_flag, specs_from_table


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


def test_without_on_change_every_due_check_runs():
    ran, skipped = checks_run([[False]] * 4, on_change=False)
    assert ran == [True] * 4 and skipped == 0


def test_what_counts_as_a_changed_clip():
    assert clip_changed(0) is False  # nothing entered the cache: nothing changed
    assert clip_changed(40) is True
    assert clip_changed(512, keyframe=True) is True  # kept whole: says nothing, so it counts
    assert clip_changed(None) is True  # dropping off: change is not known, checks are never skipped
    # the changed regions decide when known: a key frame of a static scene, a floor over an unchanged scene
    assert clip_changed(512, keyframe=True, changed_tokens=0) is False
    assert clip_changed(13, changed_tokens=0) is False
    assert clip_changed(13, changed_tokens=2) is True


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
