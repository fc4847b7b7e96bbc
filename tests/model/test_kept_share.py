"""The kept share of visual tokens (issue 30) in the terminal and on the page, from clip events with and without
the fields `visual_tokens_kept` and `keyframe` (dropping off, or a log from before them)."""

from __future__ import annotations

import io

from terminal.printer import TerminalPrinter, kept_share
from tests.support.event_helpers import make_event
from ui import render, stream_slots
from ui.state import LiveState


def clip(index, t, kept=None, full=512, keyframe=None, stream=None, cache_tokens=600):
    fields = dict(
        index=index,
        stream_time=t,
        t_start=t - 4.0,
        frames=4,
        visual_tokens=full,
        prefill_tokens=(full if kept is None else kept) + 6,
        cache_tokens=cache_tokens,
        budget=2048,
        evict_ms=0.1,
        kv_bytes=cache_tokens * 1000,
        dropped_clips=0,
    )
    if kept is not None:
        fields["visual_tokens_kept"] = kept
    if keyframe is not None:
        fields["keyframe"] = keyframe
    if stream is not None:
        fields["stream"] = stream
    return make_event("clip", **fields)


def printed(events, **kwargs) -> list[str]:
    status = io.StringIO()
    printer = TerminalPrinter(out=io.StringIO(), status_out=status, **kwargs)
    for event in events:
        printer(event)
    return status.getvalue().splitlines()


def test_terminal_shows_each_clips_kept_share_and_key_frames():
    lines = printed([clip(0, 4.0, kept=512, keyframe=True), clip(1, 8.0, kept=61, keyframe=False)])
    assert "kept 100% (512/512), key frame" in lines[0]
    assert "kept 12% (61/512)" in lines[1] and "key frame" not in lines[1]
    assert kept_share(clip(2, 12.0, kept=0, full=0)) == "kept - (0/0)"


def test_terminal_clip_line_is_unchanged_without_the_new_fields():
    (line,) = printed([clip(0, 4.0)])
    assert "kept" not in line and "key frame" not in line
    assert line == "· clip 0 [0.0-4.0s] 4 frames, cache 600/2048 tokens"


def test_terminal_prefixes_the_stream_with_several():
    lines = printed([clip(0, 4.0, kept=100, stream="door")], prefix_streams=True)
    assert lines == ["[door] · clip 0 [0.0-4.0s] 4 frames, kept 20% (100/512), cache 600/2048 tokens"]


def test_page_shows_the_last_clips_kept_share_and_the_share_since_start():
    live = LiveState(budget=2048)
    live(clip(0, 4.0, kept=512, keyframe=True))
    assert "100% of the last clip (512/512, key frame) · 100% since start" in render.stream_status(
        live.snapshot().default
    )
    live(clip(1, 8.0, kept=0, keyframe=False))
    live(clip(2, 12.0, kept=64, keyframe=False))
    view = live.snapshot().default
    shown = view.visual_clip
    assert (shown.visual_tokens, shown.visual_tokens_kept, shown.keyframe) == (512, 64, False)
    status = render.stream_status(view)
    assert "visual tokens kept: 12% of the last clip (64/512) · 38% since start" in status  # 576 / 1536
    frame = render.cache_frame(live.snapshot())
    kept = frame[frame["series"] == render.VISUAL_SERIES[1]]
    assert kept[render.X].tolist() == [4.0, 8.0, 12.0] and kept["tokens"].tolist() == [512.0, 0.0, 64.0]
    full = frame[frame["series"] == render.VISUAL_SERIES[0]]
    assert full["tokens"].tolist() == [512.0] * 3
    assert set(frame["series"]) <= set(stream_slots.cache_colors(["main"]))  # every series has its colour


def test_page_without_the_new_fields_shows_no_kept_share():
    live = LiveState(budget=2048)
    live(clip(0, 4.0))
    live(clip(1, 8.0))
    snap = live.snapshot()
    assert "kept" not in render.stream_status(snap.default)
    assert set(render.cache_frame(snap)["series"]) == set(render.CACHE_SERIES)
    # an older clip after newer ones (a log replayed, dropping turned off) keeps the last known share
    live(clip(2, 12.0, kept=128))
    live(clip(3, 16.0))
    assert "25% of the last clip (128/512)" in render.stream_status(live.snapshot().default)


def test_page_shows_the_kept_share_per_stream():
    live = LiveState(budget=2048, streams=["door", "yard"])
    live(clip(0, 4.0, kept=512, stream="door"))
    live(clip(0, 4.0, kept=512, stream="yard"))
    live(clip(1, 8.0, kept=32, stream="door"))
    live(clip(1, 8.0, kept=400, stream="yard"))
    snap = live.snapshot()
    assert "6% of the last clip (32/512)" in render.stream_status(snap.stream("door"))
    assert "78% of the last clip (400/512)" in render.stream_status(snap.stream("yard"))
    frame = render.cache_frame(snap)
    for name, values in (("door", [512.0, 32.0]), ("yard", [512.0, 400.0])):
        assert frame[frame["series"] == render.kept_series(name)]["tokens"].tolist() == values
    assert set(frame["series"]) <= set(stream_slots.cache_colors(["door", "yard"]))
