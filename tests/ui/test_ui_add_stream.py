"""Adding a stream from the page, without a browser: the "Add stream" command against a stand-in assistant, and
how the timers show a stream the page was not built with (a spare panel, the selectors, the plots' switch)."""

import dataclasses

import numpy as np
import pandas as pd
import pytest

from app.admission import AdmissionError
from capture import SourceError
from capture.options import CaptureOptions
from capture.policy import SourcePolicy
from tests.support.event_helpers import make_event
from ui import history, render, stream_slots
from ui.controls import ALL_STREAMS, MAX_STREAMS, Controls
from ui.page import live_updates, plot_updates
from ui.state import LiveState
from watches.scheduler import StandingQuestion

ADMITTED = "2 stream(s) x (1 MiB device KV (1280 tokens x 1 KiB)) = 2 MiB of 20.00 GiB free"


class FakeAssistant:
    """Refuses like `Assistant.add_stream`: a taken name, a source that fails, memory."""

    def __init__(self, names=("a",), error=None):
        self.schedule = StandingQuestion("What now?", every_s=30)
        self.names = list(names)
        self.error = error
        self.added = []

    def add_stream(self, name, capture_config):
        if self.error is not None:
            raise self.error
        if name in self.names:
            raise ValueError(f"a stream named {name!r} exists already: every stream needs its own name")
        self.names.append(name)
        self.added.append((name, capture_config))
        return ADMITTED

    def watch(self, capture_config, stream=None):
        self.added.append((stream, capture_config))


def make(names=("a",), error=None):
    assistant, live = FakeAssistant(names, error), LiveState(streams=names)
    options = CaptureOptions(fps=2.0, clip_seconds=3.0, max_size=(448, 448))
    return assistant, live, Controls(assistant, live, options, max_upload_bytes=1000, streams=names)


def test_add_stream_sends_the_name_and_the_source_with_the_page_options_and_says_the_arithmetic():
    assistant, _, controls = make()
    feedback = controls.add_stream("  door ", "path or URL", None, " rtsp://cam/door ", 0)
    assert feedback.ok and feedback.message == f"stream door added; memory: {ADMITTED}"
    ((name, config),) = assistant.added
    assert (name, config.source, config.fps, config.clip_seconds, config.max_size) == (
        "door", "rtsp://cam/door", 2.0, 3.0, (448, 448)
    )  # fmt: skip
    assert controls.streams == ("a", "door")
    assert controls.add_stream("yard", "camera", None, "", 1).ok and assistant.added[-1][1].source == 1


@pytest.mark.parametrize(
    ("name", "location", "error", "expected"),
    [
        ("", "v.mp4", None, "cannot add a stream: type a name for the new stream first"),
        ("b", "", None, "cannot add stream 'b': type a video path or a stream URL first"),
        ("a", "v.mp4", None, "cannot add stream 'a': a stream named 'a' exists already"),
        ("b", "v.mp4", SourceError("cannot open file 'v.mp4': no such file"), "stream 'b': 'v.mp4' cannot be watched"),
        (
            "b",
            "v.mp4",
            AdmissionError("one more stream does not fit in memory: 2 stream(s) x (4.00 GiB ...)"),
            "'b': one more",
        ),
    ],
)
def test_a_refused_stream_is_a_message_in_the_log_and_changes_nothing(name, location, error, expected):
    assistant, live, controls = make(error=error)
    feedback = controls.add_stream(name, "path or URL", None, location, 0)
    assert not feedback.ok and expected in feedback.message
    assert assistant.added == [] and controls.streams == ("a",)
    assert live.snapshot().log[-1].kind == "error" and feedback.message in live.snapshot().log[-1].message


def test_the_page_refuses_more_streams_than_it_has_panels_for():
    names = tuple(f"s{i}" for i in range(MAX_STREAMS))
    assistant, _, controls = make(names)
    feedback = controls.add_stream("one-more", "path or URL", None, "v.mp4", 0)
    assert not feedback.ok and f"at most {MAX_STREAMS} streams" in feedback.message and assistant.added == []


def _clip(stream, index, t, value):
    event = make_event(
        "clip", index=index, stream_time=t, t_start=t - 4, cache_tokens=50, kv_bytes=5000, budget=256,
        preview=np.full((8, 8, 3), value, np.uint8),
    )  # fmt: skip
    return dataclasses.replace(event, stream=stream)


def _added(live, name):
    live(make_event("status", stream=name, kind="stream_added", message=f"stream added; memory: {ADMITTED}"))


def test_a_one_stream_page_keeps_its_preview_and_shows_an_added_stream_in_a_spare_panel():
    live = LiveState(streams=("a",), budget=256)
    schedule = StandingQuestion("q", every_s=8)
    live(_clip("a", 0, 4.0, 1))
    seen, out = live_updates(live.snapshot(), {"names": ["a"]}, schedule, first_shown=True)
    _added(live, "b")
    live(_clip("b", 0, 4.0, 7))
    live(_clip("a", 1, 8.0, 2))
    seen, out = live_updates(live.snapshot(), seen, schedule, first_shown=True)
    assert out["preview"][0, 0, 0] == 2 and "preview:a" not in out  # a stays in the one-stream preview
    assert out["preview:b"][0, 0, 0] == 7 and "Watching" not in out["panel:b"]
    assert "a: watching" in out["status"] and "KV cache, all streams" in out["status"]
    assert out["status"].startswith(render.stream_status(live.snapshot().default))  # a's status first

    stream_slots.place_in_spares(live.snapshot(), seen, out, ("a",), count=MAX_STREAMS - 1)
    assert "preview:b" not in out and out["panel:#0"] == render.stream_status(live.snapshot().stream("b"))
    assert out["column:#0"]["visible"] is True and out["preview:#0"]["label"] == "stream b"
    assert out["preview:#0"]["value"][0, 0, 0] == 7 and seen["slot:#0"] == "b"
    stream_slots.selector_updates(live.snapshot(), seen, out)
    assert out["ask-stream"]["choices"] == [ALL_STREAMS, "a", "b"] and out["ask-stream"]["visible"] is True
    assert out["source-stream"]["choices"] == ["a", "b"] and seen["names"] == ["a", "b"]
    assert out["history-stream"]["choices"] == out["day-stream"]["choices"] == [history.ALL, "a", "b"]

    live(_clip("b", 1, 8.0, 8))  # once shown, the spare gets plain values, and the selectors are left alone
    seen, out = live_updates(live.snapshot(), seen, schedule, first_shown=True)
    stream_slots.place_in_spares(live.snapshot(), seen, out, ("a",), count=MAX_STREAMS - 1)
    stream_slots.selector_updates(live.snapshot(), seen, out)
    assert out["preview:#0"][0, 0, 0] == 8 and "column:#0" not in out and "ask-stream" not in out


def test_a_tab_opened_after_streams_were_added_is_told_about_each_of_them():
    live = LiveState(streams=("a", "b"), budget=256)
    for name in ("c", "d"):
        _added(live, name)
    seen, out = live_updates(live.snapshot(), {"names": ["a", "b"]}, StandingQuestion("q", every_s=8))
    stream_slots.place_in_spares(live.snapshot(), seen, out, ("a", "b"), count=MAX_STREAMS - 2)
    stream_slots.selector_updates(live.snapshot(), seen, out)
    assert [seen["slot:#0"], seen["slot:#1"]] == ["c", "d"] and "column:#2" not in out
    assert "panel:a" in out and "panel:c" not in out  # the configured panels keep their own components
    assert out["ask-stream"]["choices"] == [ALL_STREAMS, "a", "b", "c", "d"]


def test_the_plots_are_redrawn_in_two_steps_when_a_stream_is_added_and_when_it_gets_its_first_point():
    live = LiveState(streams=("a",), budget=256)
    live(_clip("a", 0, 4.0, 1))
    built = {"version": None, "drawn": {"names": ["a"], "plotted": None}}
    version, values = plot_updates(live.snapshot(), None, "process memory")
    seen = stream_slots.switch_plots(live.snapshot(), built, values, "process memory")
    assert seen["drawn"] == {"names": ["a"], "plotted": ["a"]} and isinstance(values["memory"], pd.DataFrame)
    live(_clip("a", 1, 8.0, 1))
    version, values = plot_updates(live.snapshot(), version, "process memory")
    assert stream_slots.switch_plots(live.snapshot(), seen, values, "process memory") is seen  # nothing new

    def tick(seen, *events):
        nonlocal version
        for event in events:
            live(event)
        version, values = plot_updates(live.snapshot(), version, "process memory")
        return stream_slots.switch_plots(live.snapshot(), seen, values, "process memory"), values

    _added(live, "b")  # b has no point yet: the frames are already one line per stream, so are the props
    step, values = tick(seen, _clip("a", 2, 12.0, 1))
    memory = values["memory"]
    assert step["drawn"] == seen["drawn"] and step["switching"] == {"names": ["a", "b"], "plotted": ["a"]}
    assert memory["x"] == render.X_RUN and memory["x_title"] == "" and render.X_RUN in memory["value"].columns
    assert {render.kv_series("a"), render.kv_series("b"), render.TOTAL_KV} <= set(memory["color_map"])
    done, values = tick(step, _clip("a", 3, 16.0, 1))
    assert done["drawn"] == {"names": ["a", "b"], "plotted": ["a"]} and done["switching"] is None
    assert values["memory"]["x_title"] == render.X_RUN and values["cache"]["title"] == "KV-cache tokens per stream"

    step, values = tick(done, _clip("b", 0, 4.0, 7))  # b's first point: its line needs a redraw too
    assert values["memory"]["x_title"] == "" and render.kv_series("b") in set(values["memory"]["value"]["series"])
    done, values = tick(step, _clip("b", 1, 8.0, 7))
    assert done["drawn"] == {"names": ["a", "b"], "plotted": ["a", "b"]} and values["cache"]["x_title"] == render.X_RUN
    after, values = tick(done, _clip("a", 4, 20.0, 1))
    assert after is done and isinstance(values["memory"], pd.DataFrame)


def test_a_tab_opened_after_a_stream_was_added_redraws_its_plots_with_its_first_data():
    live = LiveState(streams=("a",), budget=256)
    _added(live, "b")
    live(_clip("a", 0, 4.0, 1))
    built = {"version": None, "drawn": {"names": ["a"], "plotted": None}}
    _, values = plot_updates(live.snapshot(), None, "process memory")
    seen = stream_slots.switch_plots(live.snapshot(), built, values, "process memory")
    assert seen["switching"] == {"names": ["a", "b"], "plotted": ["a"]} and values["memory"]["x"] == render.X_RUN


def _policed(tmp_path, names=("a",)):
    assistant, live = FakeAssistant(names), LiveState(streams=names)
    uploads = tmp_path / "uploads"
    uploads.mkdir()
    policy = SourcePolicy(cameras=frozenset({0}), upload_dirs=(uploads,), resolver=lambda host: ["93.184.215.14"])
    options = CaptureOptions(fps=2.0, clip_seconds=3.0, max_size=(448, 448), policy=policy)
    return assistant, live, Controls(assistant, live, options, max_upload_bytes=10**6, streams=names), uploads


@pytest.mark.parametrize(
    ("location", "expected"),
    [
        ("gst:v4l2src ! tee name=t ! appsink t. ! queue ! filesink location=/tmp/x", "gst: pipelines cannot"),
        ("tcp://0.0.0.0:9000?listen=1", "'tcp:' sources cannot"),
        ("udp://0.0.0.0:9000", "'udp:' sources cannot"),
        ("http://127.0.0.1:8080/admin", "127.0.0.1 is a loopback address"),
        ("rtsp://192.168.1.20/stream1", "--allow-source-net 192.168.1.0/24"),
        ("/etc/passwd", "local paths cannot"),
        ("file:///etc/passwd", "'file:' sources cannot"),
    ],
)
def test_hostile_sources_typed_in_the_page_are_refused_and_nothing_changes(tmp_path, location, expected):
    assistant, live, controls, _ = _policed(tmp_path)
    added = controls.add_stream("evil", "path or URL", None, location, 0)
    started = controls.start("path or URL", None, location, 0)
    assert not added.ok and expected in added.message and not started.ok and expected in started.message
    assert assistant.added == [] and controls.streams == ("a",)
    assert live.snapshot().log[-1].kind == "error"


def test_the_page_watches_public_urls_configured_cameras_and_its_own_uploads_only(tmp_path):
    assistant, _, controls, uploads = _policed(tmp_path)
    clip = uploads / "clip.mp4"
    clip.write_bytes(b"x")
    elsewhere = tmp_path / "clip.mp4"
    elsewhere.write_bytes(b"x")
    assert controls.add_stream("door", "path or URL", None, "rtsp://camera.example.com/door", 0).ok
    assert controls.add_stream("lobby", "camera", None, "", 0).ok
    assert controls.add_stream("upload", "file upload", str(clip), "", 0).ok
    refused = controls.add_stream("yard", "camera", None, "", 1)
    assert not refused.ok and "camera 1 was not configured at start" in refused.message
    outside = controls.add_stream("leak", "file upload", str(elsewhere), "", 0)
    assert not outside.ok and "only files uploaded through the page" in outside.message
    assert [name for name, _ in assistant.added] == ["door", "lobby", "upload"]
    assert not assistant.added[0][1].follow_redirects  # the policy checked this host, not where a redirect leads


class RemovingAssistant(FakeAssistant):
    def __init__(self, names):
        super().__init__(names)
        self.removed = []

    def remove_stream(self, name):
        if name == self.names[0]:
            raise ValueError(f"stream {name!r} is the first stream and cannot be removed; stop it instead")
        self.names.remove(name)
        self.removed.append(name)


def test_remove_stream_removes_the_chosen_one_and_refuses_the_first():
    assistant, live = RemovingAssistant(["a", "b"]), LiveState(streams=("a", "b"))
    controls = Controls(assistant, live, CaptureOptions(), max_upload_bytes=1000, streams=("a", "b"))
    assert controls.add_stream("c", "path or URL", None, "rtsp://cam/c", 0).ok
    feedback = controls.remove_stream("c")
    assert feedback.ok and feedback.message == "stream c removed; its memory is freed"
    assert controls.streams == ("a", "b") and assistant.removed == ["c"]
    first = controls.remove_stream("a")
    assert not first.ok and "cannot be removed; stop it instead" in first.message
    assert not controls.remove_stream(ALL_STREAMS).ok and assistant.removed == ["c"]


def _removed(live, name):
    live(make_event("status", stream=name, kind="stream_removed", message="stream removed"))


def test_a_removed_stream_leaves_the_page_its_spare_panel_hidden_and_the_selectors_updated():
    live = LiveState(streams=("a", "b"), budget=256)
    schedule = StandingQuestion("q", every_s=8)
    for name in ("c", "d"):
        _added(live, name)
        live(_clip(name, 0, 4.0, 5))
    seen, out = live_updates(live.snapshot(), {"names": ["a", "b"]}, schedule)
    stream_slots.place_in_spares(live.snapshot(), seen, out, ("a", "b"), count=MAX_STREAMS - 2)
    stream_slots.selector_updates(live.snapshot(), seen, out)
    assert [seen["slot:#0"], seen["slot:#1"]] == ["c", "d"]

    _removed(live, "c")
    _removed(live, "b")  # a stream of the start
    assert [view.name for view in live.snapshot().streams] == ["a", "d"]
    assert live.snapshot().log[-1].message == "b · stream removed"
    seen, out = live_updates(live.snapshot(), seen, schedule)
    stream_slots.place_in_spares(live.snapshot(), seen, out, ("a", "b"), count=MAX_STREAMS - 2)
    stream_slots.selector_updates(live.snapshot(), seen, out)
    assert seen["slot:#0"] == "d" and out["preview:#0"]["label"] == "stream d"  # d moves up to the first spare
    assert out["column:#1"]["visible"] is False and "slot:#1" not in seen  # the spare d had is hidden
    assert out["panel:b"] == stream_slots.REMOVED  # b's own panel says so
    assert out["ask-stream"]["choices"] == [ALL_STREAMS, "a", "d"] and out["source-stream"]["choices"] == ["a", "d"]
