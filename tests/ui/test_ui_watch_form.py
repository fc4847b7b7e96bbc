"""The page's "Watch for" section without a browser: `WatchForm`'s Add and End on the real runtime watches
(watches.runtime.RuntimeWatches, a stand-in assistant), what they refuse and say, the list's HTML, and the
section on the page (and not on a fleet's page)."""

import json

import pytest

from capture.options import CaptureOptions
from tests.support.event_helpers import make_event
from tests.watches.test_watches_runtime import Clock, FakeAssistant
from ui import render, stream_slots
from ui.controls import ALL_STREAMS, Controls
from ui.page import build_page
from ui.preview_files import PreviewFiles
from ui.state import LiveState
from ui.watch_form import EVERY, ON_CHANGE, WatchForm, describe, watches_html
from watches.runtime import RuntimeWatches, WatchLimits, state_path
from watches.scheduler import StandingQuestion
from watches.spec import WatchSpec

CONFIGURED = [WatchSpec("smoke", "Is there smoke?")]


def form(tmp_path, limits=None):
    assistant, clock, live = FakeAssistant(), Clock(), LiveState(streams=("door", "yard"))
    watches = RuntimeWatches(assistant, CONFIGURED, state_path(tmp_path), limits, clock)
    return assistant, clock, live, watches, WatchForm(watches, live.note)


def logged(live):
    return [(line.kind, line.message) for line in live.snapshot().log]


def test_add_sets_a_page_watch_on_every_stream_applied_and_kept_across_restarts(tmp_path):
    assistant, _, live, watches, page = form(tmp_path)
    feedback = page.add("  Is there a person at the door? ", ALL_STREAMS, EVERY, 5, None, False, "")
    assert feedback.ok, feedback.message
    (watch,) = watches.list()
    assert watch.owner == "page" and watch.expires_at is None and not watch.one_shot
    assert watch.spec.question == "Is there a person at the door?" and watch.spec.streams is None
    assert (watch.spec.every, watch.spec.on_change) == (5.0, False)
    assert watch.spec.name.startswith("watch-") and page.names() == [watch.spec.name]
    assert assistant.applied[-1][0] == [watch.spec]  # sent to the assistant, as the API's are
    assert feedback.message == f"watching: {describe(watch)}"
    assert "on all streams, every 5 s; ends when ended; set by page" in feedback.message
    kept = json.loads(state_path(tmp_path).read_text())["watches"]
    assert [(w["spec"]["name"], w["owner"]) for w in kept] == [(watch.spec.name, "page")]
    assert logged(live) == []


def test_add_on_one_stream_on_change_with_an_expiry_and_once(tmp_path):
    _, clock, _, watches, page = form(tmp_path)
    feedback = page.add("Is the gate open?", "yard", ON_CHANGE, 20, 30, True, "gate")
    assert feedback.ok, feedback.message
    watch = watches.get("gate")
    assert watch.spec.streams == ("yard",) and watch.spec.every == 20 and watch.spec.on_change
    assert watch.expires_at == clock.now + 1800 and watch.one_shot
    assert "on yard, every 20 s when the picture changed; ends at its first alert or at " in feedback.message


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (("", ALL_STREAMS, EVERY, 10), "type the yes/no question to watch for first"),
        (("Is it dark?", ALL_STREAMS, None, 10), "choose how often it is checked"),
        (("Is it dark?", ALL_STREAMS, EVERY, None), "give how often it is checked, in seconds"),
        (("Is it dark?", ALL_STREAMS, EVERY, 0.5), "every must be 1 to 86400 seconds of stream time"),
        (("Is it dark?", ALL_STREAMS, EVERY, 10, -5), "the expiry is a number of minutes > 0"),
        (("Is it dark?", "attic", EVERY, 10), "names unknown stream(s) attic; streams: door, yard"),
        (("x" * 101, ALL_STREAMS, EVERY, 10), "the question is too long (101 characters"),
        (("Is it dark?", ALL_STREAMS, EVERY, 10, None, False, "Dark!"), "bad alert name 'Dark!'"),
        (("Is it dark?", ALL_STREAMS, EVERY, 10, None, False, "smoke"), "a configured watch (--alert, [alerts.NAME])"),
    ],
)
def test_a_refused_watch_is_said_logged_and_changes_nothing(tmp_path, args, expected):
    assistant, _, live, watches, page = form(tmp_path)
    feedback = page.add(*args)
    assert not feedback.ok and feedback.message.startswith("cannot add the watch: ")
    assert expected in feedback.message, feedback.message
    assert logged(live) == [("error", feedback.message)]  # the page's activity log, as every refusal
    assert watches.list() == [] and assistant.applied == [] and not state_path(tmp_path).exists()


def test_the_page_shares_one_owners_limit_and_a_taken_name_is_refused(tmp_path):
    _, _, _, watches, page = form(tmp_path, WatchLimits(per_owner=2, total=10))
    assert page.add("Is it dark?", ALL_STREAMS, EVERY, 10, name="dark").ok
    taken = page.add("Is it light?", ALL_STREAMS, EVERY, 10, name="dark")
    assert not taken.ok and "a watch named 'dark' exists already" in taken.message
    assert page.add("Is it light?", ALL_STREAMS, EVERY, 10).ok
    third = page.add("Is it raining?", ALL_STREAMS, EVERY, 10)
    assert not third.ok and "page holds 2 watches already" in third.message
    watches.add({"question": "Is it raining?"}, owner="alice")  # another owner still may
    assert len(watches.list()) == 3


def test_end_removes_a_runtime_watch_and_refuses_unknown_configured_and_none(tmp_path):
    assistant, _, live, watches, page = form(tmp_path)
    watches.add({"name": "parcel", "question": "Is there a parcel?"}, owner="alice")  # set by the API: ends too
    assert page.end("parcel").message == "watch parcel ended"
    assert watches.list() == [] and assistant.applied[-1] == ([], {"parcel": "removed"})
    for name, expected in (("parcel", "no runtime watch named 'parcel'"), ("smoke", "is configured at start"),
                           (None, "choose the watch to end first")):  # fmt: skip
        feedback = page.end(name)
        assert not feedback.ok and expected in feedback.message
    assert len(logged(live)) == 3


def test_the_list_shows_configured_and_runtime_watches_escaped(tmp_path):
    _, _, _, watches, page = form(tmp_path)
    assert "No watches yet" in watches_html([], [])
    page.add("Is <b>it</b> & on?", "door", EVERY, 3, None, False, "tag")
    listing = page.html()
    assert '<tr class="configured"><td>smoke</td><td>Is there smoke?</td>' in listing
    assert '<tr class="watch-row" data-watch="tag"><td>tag</td><td>Is &lt;b&gt;it&lt;/b&gt; &amp; on?</td>' in listing
    assert "<td>door</td><td>every 3 s</td><td>when ended</td><td>page</td>" in listing
    assert "<b>it</b>" not in listing


def page_elements(page) -> dict[str, bool]:
    return {block.elem_id: block.visible for block in page.blocks.values() if getattr(block, "elem_id", None)}


@pytest.mark.parametrize("with_watches", [True, False])
def test_the_page_has_the_watch_section_only_when_given_its_commands(tmp_path, with_watches):
    _, _, live, _, page_form = form(tmp_path)
    schedule = StandingQuestion("What now?", every_s=30)
    controls = Controls(object(), live, CaptureOptions(), max_upload_bytes=2**20)
    info = render.PageInfo("tiny", "-", "cpu", "float32", "inf-mllm", 256, 16, "-", "process")
    page = build_page(live, controls, info, schedule, PreviewFiles(tmp_path / "p"),
                      watches=page_form if with_watches else None)  # fmt: skip
    try:
        elements = page_elements(page)
    finally:
        page.close()
    section = {"watch-question", "watch-stream", "watch-mode", "watch-every", "watch-expires", "watch-once",
               "watch-add", "watch-list", "watch-end-name", "watch-end"}  # fmt: skip
    assert section <= elements.keys() if with_watches else not section & elements.keys()


def test_a_stream_added_later_joins_the_watch_stream_selector():
    live = LiveState(streams=("a",))
    live(make_event("status", stream="b", kind="stream_added", message="stream added"))
    values, seen = {}, {"names": ["a"]}
    stream_slots.selector_updates(live.snapshot(), seen, values)
    assert values["watch-stream"]["choices"] == [ALL_STREAMS, "a", "b"] and values["watch-stream"]["visible"]
