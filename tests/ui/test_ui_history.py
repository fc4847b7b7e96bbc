"""The History tab's formatting and search handler, and the evidence under answers in the chat: pure, no model,
no browser. One test writes a real timeline (timeline.TimelineWriter) and searches it through app.web's
adapter, as the page does."""

from __future__ import annotations

import base64
import time
from dataclasses import dataclass

import numpy as np

from app.front_door import TimelineHistory
from bus import ClipEvent
from bus.stats import EvidenceSpan
from tests.support.event_helpers import make_event
from timeline import TimelineConfig, TimelineWriter
from ui import evidence, history, render
from ui.history import HistoryUnavailable
from ui.state import LiveState

JPEG = base64.b64decode(  # a 1x1 JPEG
    "/9j/4AAQSkZJRgABAQAAAQABAAD/2wBDAAgGBgcGBQgHBwcJCQgKDBQNDAsLDBkSEw8UHRofHh0aHBwgJC4nICIsIxwcKDcpLDAxNDQ0Hyc5"
    "PTgyPC4zNDL/wAALCAABAAEBAREA/8QAFAABAAAAAAAAAAAAAAAAAAAACf/EABQQAQAAAAAAAAAAAAAAAAAAAAD/2gAIAQEAAD8AKp//2Q=="
)


@dataclass(frozen=True)
class FakeMoment:
    id: int
    kind: str = "answer"
    stream: str | None = "door"
    t_wall: float = 1_700_000_000.0
    start_s: float | None = 760.0
    end_s: float | None = 764.5
    question: str | None = "Who is at the door?"
    text: str | None = "A courier <with> a parcel."
    who: str | None = "person"
    p_yes: float | None = None
    alert: str | None = None
    state: str | None = None
    has_thumbnail: bool = True
    score: float | None = None


class FakeSource:
    def __init__(self, moments=(), error: Exception | None = None) -> None:
        self.moments, self.error, self.calls, self.thumbs = list(moments), error, [], []

    def search(self, text, since_s, stream, limit):
        self.calls.append((text, since_s, stream, limit))
        if self.error is not None:
            raise self.error
        return self.moments

    def thumbnail(self, row_id):
        return self.thumbnails([row_id]).get(row_id)

    def thumbnails(self, row_ids):
        self.thumbs.append(list(row_ids))
        return {row_id: JPEG for row_id in row_ids if row_id % 2}


def test_spans_are_stream_time_hh_mm_ss():
    assert history.span(760.0, 764.9) == "00:12:40-00:12:44"
    assert history.span(3725.0, 3725.4) == "01:02:05"
    assert history.span(None, 8.0) == "00:00:08"
    assert history.span(None, None) == "--:--:--"  # one answer for "unknown" (bus.clock.UNKNOWN)


def test_the_table_keeps_the_order_given_escapes_text_and_shows_thumbnails_by_row_id():
    moments = [FakeMoment(3), FakeMoment(2, kind="alert", alert="person", text="person began", who="watch")]
    page = history.history_html(moments, {3: history.jpeg_src(JPEG), 2: None})
    assert page.index('data-row-id="3"') < page.index('data-row-id="2"')
    assert page.count("<img ") == 1 and 'src="data:image/jpeg;base64,' in page
    assert "A courier &lt;with&gt; a parcel." in page and "<with>" not in page
    assert "00:12:40-00:12:44" in page and history.local_time(1_700_000_000.0) in page
    assert "<b>alert person</b>" in page and ">watch<" in page and ">door<" in page
    assert "Nothing found" in history.history_html([])


def test_search_passes_the_filters_and_fetches_thumbnails_only_for_rows_that_have_one():
    source = FakeSource([FakeMoment(1), FakeMoment(2), FakeMoment(3, has_thumbnail=False)])
    page = history.search_html(source, "  courier ", "door", "last 6 h")
    assert source.calls == [("courier", 6 * 3600.0, "door", history.LIMIT)]
    assert source.thumbs == [[1, 2]]  # one call; 2 has none in the file: no image
    assert page.count("<img ") == 1 and "3 moments, best match first" in page
    history.search_html(source, "", history.ALL, "all")
    assert source.calls[-1] == (None, None, None, history.LIMIT)
    assert "newest first" in history.search_html(source, "", None, "last 1 h")


def test_a_failing_or_missing_timeline_gives_a_message_not_an_exception():
    unreadable = history.search_html(FakeSource(error=HistoryUnavailable("database is locked")), "x", None, "all")
    assert "cannot search the timeline: database is locked" in unreadable
    broken = history.search_html(FakeSource(error=RuntimeError("boom")), "x", None, "all")
    assert "the search failed: RuntimeError: boom" in broken
    assert "timeline is off" in history.search_html(None, "x", None, "all")
    assert "unknown time filter" in history.search_html(FakeSource(), "x", None, "last year")


def test_evidence_merges_adjacent_spans_per_source_in_order_of_first_appearance():
    items = [
        {"stream": "a", "start": 768.0, "end": 772.0, "source": "recall"},
        {"stream": "a", "start": 20.0, "end": 24.0, "source": "attention"},
        {"stream": "a", "start": 760.0, "end": 764.0, "source": "recall"},
        {"stream": "a", "start": 764.0, "end": 768.0, "source": "recall"},
        {"stream": "a", "start": 30.0, "end": 34.0, "source": "attention"},
    ]
    spans = [EvidenceSpan(**item) for item in items]
    assert evidence.seen_at(spans) == (
        "seen at 00:12:40-00:12:52 (recall), 00:00:20-00:00:24 (attention), 00:00:30-00:00:34 (attention)"
    )
    assert evidence.seen_at([]) == ""


def _clip(stream: str, index: int, t_start: float, value: int) -> ClipEvent:
    frame = np.full((48, 64, 3), value, dtype=np.uint8)
    event = {"stream": stream, "index": index, "t_start": t_start, "stream_time": t_start + 4.0}
    return make_event("clip", **event, cache_tokens=10, t_wall=1.0, preview=frame)


def _answer(live: LiveState, stream: str, items: list[dict], round_: int = 1) -> None:
    live(make_event("answer_start", stream=stream, round=round_, question="what?", stream_time=40.0))
    live(
        make_event("answer", stream=stream, round=round_, question="what?", answer="a box", evidence=items, t_wall=2.0)
    )


def test_answers_show_seen_at_and_thumbnails_of_kept_clips_and_of_timeline_rows():
    live = LiveState(streams=["a"])
    for k in range(12):  # only the latest RECENT_CLIPS previews are kept
        live(_clip("a", k, 4.0 * k, 10 * k))
    items = [
        {"stream": "a", "start": 40.0, "end": 44.0, "source": "attention", "score": 0.5},
        {"stream": "a", "start": 44.0, "end": 48.0, "source": "attention", "score": 0.2},
        {"stream": "a", "start": 0.0, "end": 4.0, "source": "recall", "score": 0.1},  # its preview is gone
        {"stream": "a", "start": 8.0, "end": 12.0, "source": "timeline", "score": 1.0, "row_id": 7},
        {"stream": "a", "start": 9.0, "end": 10.0, "source": "timeline", "score": 1.0, "row_id": 8},
    ]
    _answer(live, "a", items)
    asked: list[int] = []
    thumbs = evidence.EvidenceThumbs(lambda row: asked.append(row) or JPEG)
    snap = live.snapshot()
    made = thumbs.for_snapshot(snap)
    turn = snap.turns[-1]
    labels = [label for _, label in made[turn.seq]]
    assert labels == ["00:00:40-00:00:48 (attention)", "00:00:08-00:00:12 (timeline)"]
    assert asked == [7]  # one thumbnail per merged span
    assert thumbs.for_snapshot(snap) == made and asked == [7]  # made once
    chat = render.chat_messages(snap, thumbs=made)[-1]["content"]
    assert "seen at 00:00:40-00:00:48 (attention), 00:00:00-00:00:04 (recall), 00:00:08-00:00:12 (timeline)" in chat
    assert chat.count('<img class="evidence-thumb"') == 2 and chat.index("a box") < chat.index("seen at")
    no_timeline = evidence.EvidenceThumbs(None).for_snapshot(snap)[turn.seq]
    assert [label for _, label in no_timeline] == ["00:00:40-00:00:48 (attention)"]


def test_thumbnails_are_bounded_per_answer_and_to_the_latest_answers():
    live = LiveState(streams=["a"])
    for k in range(8):
        live(_clip("a", k, 4.0 * k, 20 * k))
    spans = [{"stream": "a", "start": 8.0 * k, "end": 8.0 * k + 4, "source": "attention"} for k in range(4)]
    for r in range(evidence.THUMB_TURNS + 2):
        _answer(live, "a", spans, round_=r)
    made = evidence.EvidenceThumbs().for_snapshot(live.snapshot())
    seqs = [t.seq for t in live.snapshot().turns]
    assert sorted(made) == seqs[-evidence.THUMB_TURNS :]
    assert all(len(v) == evidence.MAX_THUMBS for v in made.values())


def test_a_new_source_forgets_the_kept_previews():
    live = LiveState(streams=["a"])
    live(_clip("a", 0, 0.0, 5))
    assert len(live.snapshot().default.recent) == 1
    live(make_event("status", stream="a", kind="stream_watching", message="watching b.mp4", t_wall=1.0))
    assert live.snapshot().default.recent == ()


def test_the_page_adapter_searches_a_real_timeline_and_reads_its_thumbnails(tmp_path):
    path = tmp_path / "timeline.sqlite"
    writer = TimelineWriter(TimelineConfig(path))
    writer.start()
    now = time.time()
    frame = np.full((120, 160, 3), 200, dtype=np.uint8)
    writer(make_event("clip", stream="door", index=0, stream_time=8.0, preview=frame, t_wall=now))
    for k, answer in enumerate(["a red bicycle", "an empty porch"]):
        event = {"stream": "door", "question": "what is there?", "answer": answer}
        writer(make_event("answer", **event, round=k, stream_time=8.0 + k, t_wall=now + k, auto=False))
    writer.close(timeout=5.0)
    source = TimelineHistory(path)
    page = history.search_html(source, "bicycle", "door", "last 1 h")
    assert "1 moment, best match first" in page and "a red bicycle" in page and "empty porch" not in page
    assert page.count('<img src="data:image/jpeg;base64,') == 1
    assert "0 moments" in history.search_html(source, "bicycle", "garden", "all")
    missing = history.search_html(TimelineHistory(tmp_path / "none.sqlite"), "x", None, "all")
    assert "cannot search the timeline" in missing
