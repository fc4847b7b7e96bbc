"""Runtime watches (watches/runtime.py): added, changed and removed while running, applied on the worker
(app/runtime_watch_apply.py), kept across a restart in a private file, ended by expiry and by one-shot."""

import json
import stat
import time

import pytest

from app.runtime_watch_apply import apply_runtime_watches
from app.stream_events import StreamEvents
from bus import Alert, EventBus, WatchEvent, WatchLifecycle
from bus.input_limits import AssistantBusy, InputLimits
from watches.runtime import Conflict, NotFound, RuntimeWatches, TooMany, WatchLimits, state_path
from watches.spec import WatchSpec
from watches.watch import Watch


class FakeAssistant:
    """What the registry needs: streams, check_question, set_runtime_watches (recorded)."""

    def __init__(self, streams=("door", "yard")) -> None:
        self.streams = {name: object() for name in streams}
        self.limits = InputLimits(max_question_chars=100)
        self.applied: list[tuple[list[WatchSpec], dict]] = []
        self.busy = False

    def desk_streams(self):  # the desk's streams by name (bus.desk): only names are read
        return dict.fromkeys(self.streams)

    def check_question(self, question: str) -> str:
        return self.limits.check(question)

    def set_runtime_watches(self, specs, reasons=None, owners=None) -> None:
        if self.busy:
            raise AssistantBusy("busy: try again")
        self.applied.append((list(specs), dict(reasons or {})))
        self.owners = dict(owners or {})


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def registry(tmp_path, **kwargs):
    assistant = FakeAssistant()
    clock = Clock()
    kwargs.setdefault("path", state_path(tmp_path))
    watches = RuntimeWatches(assistant, clock=clock, **kwargs)
    return assistant, clock, watches


def test_a_watch_is_added_applied_listed_changed_and_removed(tmp_path):
    assistant, _, watches = registry(tmp_path)
    added = watches.add({"name": "person", "question": "Is there a person?", "every": 2}, owner="phone")
    assert added.spec == WatchSpec("person", "Is there a person?", every=2)
    assert assistant.applied[-1] == ([added.spec], {}) and assistant.owners == {"person": "phone"}
    assert [w.spec.name for w in watches.list()] == ["person"]
    changed = watches.change("person", {"threshold": 0.8, "streams": ["door"]})
    assert changed.spec.threshold == 0.8 and changed.spec.streams == ("door",) and changed.owner == "phone"
    assert assistant.applied[-1][0] == [changed.spec]
    watches.remove("person")
    assert assistant.applied[-1] == ([], {"person": "removed"})
    assert watches.list() == []


def test_a_name_is_made_when_none_is_given(tmp_path):
    _, _, watches = registry(tmp_path)
    watch = watches.add({"question": "Is the gate open?"})
    assert watch.spec.name.startswith("watch-")


@pytest.mark.parametrize(
    ("settings", "error", "message"),
    [
        ({"question": ""}, ValueError, "empty"),
        ({"question": "x" * 101}, ValueError, "too long"),
        ({"question": "q?", "every": 0}, ValueError, "every"),
        ({"question": "q?", "every": 0.5}, ValueError, "1 to 86400"),
        ({"question": "q?", "every": "often"}, ValueError, "every"),
        ({"question": "q?", "threshold": 2}, ValueError, "between 0 and 1"),
        ({"question": "q?", "name": "Bad Name"}, ValueError, "bad alert name"),
        ({"question": "q?", "streams": ["garage"]}, NotFound, "unknown stream"),
        ({"question": "q?", "streams": "door"}, ValueError, "list of stream names"),
        ({"question": "q?", "colour": "red"}, ValueError, "unknown watch setting"),
    ],
)
def test_bad_watches_are_refused_with_a_clear_message_and_change_nothing(tmp_path, settings, error, message):
    assistant, _, watches = registry(tmp_path)
    with pytest.raises(error, match=message):
        watches.add(settings)
    assert watches.list() == [] and assistant.applied == []


def test_bad_expiry_and_one_shot_values_are_refused(tmp_path):
    _, _, watches = registry(tmp_path)
    for value in (0, -5, float("inf"), "soon", True, 10**9):
        with pytest.raises(ValueError, match="expires_in_s"):
            watches.add({"question": "q?"}, expires_in_s=value)
    with pytest.raises(ValueError, match="one_shot"):
        watches.add({"question": "q?"}, one_shot="yes")
    watches.add({"name": "a", "question": "q?"})
    with pytest.raises(ValueError, match="cannot change name"):
        watches.change("a", {"name": "b"})


def test_names_are_unique_and_configured_watches_are_not_changed_here(tmp_path):
    _, _, watches = registry(tmp_path, configured=[WatchSpec("person", "Is there a person?")])
    with pytest.raises(Conflict, match="configured"):
        watches.add({"name": "person", "question": "q?"})
    watches.add({"name": "gate", "question": "Is the gate open?"})
    with pytest.raises(Conflict, match="exists already"):
        watches.add({"name": "gate", "question": "q?"})
    with pytest.raises(Conflict, match="configured at start"):
        watches.remove("person")
    with pytest.raises(NotFound, match="no runtime watch named 'nope'"):
        watches.change("nope", {"every": 5})


def test_ten_thousand_adds_from_one_token_are_refused_past_its_limit(tmp_path):
    assistant, _, watches = registry(tmp_path, limits=WatchLimits(per_owner=64, total=100), path=None)
    refused = 0
    for k in range(10_000):
        try:
            watches.add({"question": f"Is there thing {k}?"}, owner="script")
        except TooMany as err:
            refused += 1
            assert "64 watches" in str(err)
    assert watches.count("script") == 64 and refused == 10_000 - 64
    assert len(assistant.applied) == 64  # a refusal never reaches the assistant
    for k in range(36):
        watches.add({"question": f"q{k}?"}, owner="other")
    with pytest.raises(TooMany, match="100 watches are set"):
        watches.add({"question": "one more?"}, owner="third")


def test_a_busy_assistant_refuses_and_the_registry_is_unchanged(tmp_path):
    assistant, _, watches = registry(tmp_path)
    watches.add({"name": "gate", "question": "Is the gate open?"})
    assistant.busy = True
    with pytest.raises(AssistantBusy):
        watches.add({"name": "door", "question": "Is the door open?"})
    with pytest.raises(AssistantBusy):
        watches.remove("gate")
    assert [w.spec.name for w in watches.list()] == ["gate"]


def test_watches_survive_a_restart_in_a_private_file_until_they_expire(tmp_path):
    assistant, clock, watches = registry(tmp_path)
    watches.add({"name": "forever", "question": "Is there a person?", "streams": ["door"]}, owner="phone")
    watches.add({"name": "brief", "question": "Is the gate open?"}, expires_in_s=60, one_shot=True)
    path = state_path(tmp_path)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert {w["spec"]["name"] for w in json.loads(path.read_text())["watches"]} == {"forever", "brief"}

    again = RuntimeWatches(FakeAssistant(), path=path, clock=clock)
    again.start()
    try:
        kept = {w.spec.name: w for w in again.list()}
        assert set(kept) == {"forever", "brief"} and kept["forever"].owner == "phone"
        assert kept["brief"].one_shot and kept["brief"].expires_at == 1060.0
        assert kept["forever"].spec.streams == ("door",)
        assert {s.name for s in again.assistant.applied[0][0]} == {"forever", "brief"}
    finally:
        again.close()

    clock.now = 1061.0
    late = RuntimeWatches(FakeAssistant(), path=path, clock=clock)
    late.start()
    late.close()
    assert [w.spec.name for w in late.list()] == ["forever"]


@pytest.mark.parametrize(
    "text",
    ["{not json", "[" * 100_000 + "]" * 100_000, '{"watches": {"a": 1}}', '{"watches": ["x", 3, null]}', "[]"],
)
def test_a_damaged_state_file_starts_without_it_and_keeps_it_aside(tmp_path, text):
    """Not JSON, nested past the decoder, or not a list of watches: no traceback, the file is kept aside as
    `.unreadable` (the next save would overwrite it), and watches added now are saved."""
    path = state_path(tmp_path)
    path.write_text(text)
    watches = RuntimeWatches(FakeAssistant(), path=path)
    watches.start()
    watches.add({"name": "new", "question": "Is it new?"})
    watches.close()
    assert [w.spec.name for w in watches.list()] == ["new"]
    if text.startswith('{"watches": ["x"'):  # a list whose entries are skipped one by one: nothing to keep aside
        return
    assert path.with_name(path.name + ".unreadable").read_text() == text


def test_hostile_entries_are_checked_as_added_ones_and_limits_hold(tmp_path):
    """Entries written by hand past the API's checks: a check every 0.01 s, a question past the limit, a spec with
    an unknown key, and more watches of one owner than it may hold; each bad one skipped, the rest kept."""
    path = state_path(tmp_path)

    def entry(name, owner="phone", **spec):
        return {"spec": {"name": name, "question": "Is it there?", **spec}, "owner": owner}

    records = [entry("fast", every=0.01), entry("long", question="x" * 500), entry("odd", colour="red")]
    records += [entry(f"w{i}") for i in range(5)] + [entry("other", owner="tablet")]
    records.append(entry("ghost", owner="tablet", streams=["gone"]))
    path.write_text(json.dumps({"version": 1, "watches": records}))
    watches = RuntimeWatches(FakeAssistant(), path=path, limits=WatchLimits(per_owner=3, total=10))
    watches.start()
    watches.close()
    kept = [w.spec.name for w in watches.list()]
    assert kept == ["w0", "w1", "w2", "other", "ghost"]  # ghost's stream may come back: it waits for it


def test_the_state_file_is_never_read_or_written_through_a_link(tmp_path):
    """A link planted as the state file is not followed (its target is neither read nor overwritten: it is moved
    aside as the link it is); one planted as the `.part` the save writes first is replaced, not written through."""
    secret = tmp_path / "elsewhere.json"
    secret.write_text(json.dumps({"version": 1, "watches": [{"spec": {"name": "planted", "question": "q?"}}]}))
    path = state_path(tmp_path / "data")
    path.parent.mkdir(mode=0o700)
    path.symlink_to(secret)
    path.with_name(path.name + ".part").symlink_to(secret)
    watches = RuntimeWatches(FakeAssistant(), path=path)
    watches.start()
    assert watches.list() == []
    watches.add({"name": "mine", "question": "Is it mine?"})
    watches.close()
    assert "planted" in secret.read_text() and "mine" not in secret.read_text()
    assert not path.is_symlink() and "mine" in path.read_text()


def wait_for(condition, timeout=5.0):
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.02)


def test_the_keeper_ends_expired_and_one_shot_watches(tmp_path):
    assistant, clock, watches = registry(tmp_path)
    watches.start()
    try:
        watches.add({"name": "brief", "question": "q?"}, expires_in_s=5)
        watches.add({"name": "once", "question": "Is there a person?"}, one_shot=True)
        watches.add({"name": "stays", "question": "Is there a cat?"})
        watches(Alert(stream="door", id="door-stays-1", alert="stays", state="begin"))  # not one-shot: stays
        watches(Alert(stream="door", id="door-once-1", alert="once", state="begin"))
        wait_for(lambda: "once" not in {w.spec.name for w in watches.list()})
        assert assistant.applied[-1][1] == {"once": "one-shot"}
        clock.now += 6
        wait_for(lambda: [w.spec.name for w in watches.list()] == ["stays"])
        assert assistant.applied[-1][1] == {"brief": "expired"}
    finally:
        watches.close()


def test_applying_keeps_unchanged_watches_and_ends_the_alerts_of_removed_ones():
    """On the worker: configured watches stay, an unchanged runtime watch keeps its state, a removed one whose
    alert is on publishes that alert's end with the reason; a `watch` event says when one begins to run on the
    stream and when it ends there for good (a changed one runs on)."""
    from types import SimpleNamespace

    events = []
    bus = EventBus()
    bus.subscribe(events.append)
    configured = Watch(WatchSpec("person", "Is there a person?"), "door")
    gate_spec, cat_spec = WatchSpec("gate", "Is the gate open?"), WatchSpec("cat", "Is there a cat?", streams=("yard",))
    stream = SimpleNamespace(name="door", stream_time=50.0, watches=[configured])
    apply_runtime_watches(stream, (), [gate_spec, cat_spec], StreamEvents(bus), owners={"gate": "phone"})
    assert [w.spec.name for w in stream.watches] == ["person", "gate"]  # cat watches the yard only
    assert [w.owner for w in stream.watches] == ["", "phone"]  # who set it: its checks take turns by owner
    assert [(e.stream, e.alert, e.change) for e in events] == [("door", "gate", WatchLifecycle.SET)]
    events.clear()

    def alerting(watch: Watch) -> Watch:
        watch.state.on, watch.state.id, watch.state.began_at = True, "door-gate-7", 20.0
        return watch

    gate = alerting(stream.watches[1])
    apply_runtime_watches(stream, [gate_spec, cat_spec], [gate_spec], StreamEvents(bus))
    assert stream.watches[1] is gate and not events  # unchanged: the same watch, its alert still on
    changed = WatchSpec("gate", "Is the gate open?", threshold=0.8)
    apply_runtime_watches(stream, [gate_spec], [changed], StreamEvents(bus))
    assert [(type(e), e.alert) for e in events] == [(Alert, "gate"), (WatchEvent, "gate")]
    assert (events[0].reason, events[1].change) == ("changed", WatchLifecycle.SET)  # set again, never ended
    events.clear()
    alerting(stream.watches[1])
    apply_runtime_watches(stream, [changed], [], StreamEvents(bus), {"gate": "one-shot"})
    assert [w.spec.name for w in stream.watches] == ["person"]
    end, ended = events  # the alert's end first, then the watch's
    assert (end.alert, end.state, end.id, end.reason, end.duration_s) == (
        "gate",
        "end",
        "door-gate-7",
        "one-shot",
        30.0,
    )
    assert isinstance(ended, WatchEvent) and (ended.alert, ended.change, ended.reason) == (
        "gate",
        WatchLifecycle.ENDED,
        "one-shot",
    )
