"""Typed data to the edges (issue 37): the session's stats travel whole in the events and flatten into the same
records; a reconnection is its own capture kind, the stream's state follows the kind (never the text); the fleet's
head reports the events a host's outbox dropped; logins are redacted inside an answer's stats too."""

from __future__ import annotations

import dataclasses
import logging
from types import SimpleNamespace

from app.capture_events import CaptureEvents
from app.stream_events import StreamEvents
from bus import (
    Answer,
    AnswerStats,
    CaptureChange,
    CaptureKind,
    ClipEvent,
    ClipStats,
    ErrorEvent,
    EventBus,
    EventsDropped,
    EvidenceSpan,
    StreamState,
    from_record,
    to_record,
)
from bus.redact import redacted
from capture.types import CaptureEvent
from fleet.coordinator import Coordinator

CLIP_RECORD_KEYS = {
    "type", "v", "stream", "t_wall", "index", "stream_time", "t_start", "frames", "visual_tokens",
    "visual_tokens_kept", "visual_tokens_changed", "keyframe", "prefill_tokens", "cache_tokens", "budget", "evict_ms",
    "prefill_s", "lag_s", "queued_clips", "kv_bytes", "store_tokens", "store_bytes", "store_dropped_tokens",
    "store_oldest_time", "dropped_clips", "dropped_frames",
}  # fmt: skip
ANSWER_RECORD_KEYS = {
    "type", "v", "stream", "t_wall", "round", "question", "answer", "auto", "stream_time", "batch", "answer_tokens",
    "prefill_tokens", "ttft_s", "decode_tokens_per_s", "cache_tokens_before", "cache_tokens_after",
    "cache_tokens_end", "evict_ms", "kv_bytes", "device_mem_bytes", "process_rss_bytes", "cut_off", "recalled_tokens",
    "recall_ms", "store_tokens", "store_bytes", "evidence", "memory_backend", "memory_label", "device_used_bytes",
    "device_total_bytes", "process_threads", "process_open_fds",
    "request",  # added with the API: the id of the request that asked (None for the terminal, the page, auto)
}  # fmt: skip


def test_stats_flatten_into_the_record_keys_records_always_had_and_come_back_typed():
    stats = ClipStats(
        frames=4, visual_tokens=64, visual_tokens_kept=9, evict_ms=1.23456, prefill_s=0.123456, vision_s=0.1
    )
    record = to_record(ClipEvent(stream="a", index=0, stream_time=4.0, stats=stats))
    assert set(record) == CLIP_RECORD_KEYS  # vision_s stays out: benchmarks only
    assert (record["evict_ms"], record["prefill_s"]) == (1.235, 0.1235)  # as the assistant always rounded them
    back = from_record(record)
    assert back.stats == dataclasses.replace(stats, evict_ms=1.235, prefill_s=0.1235, vision_s=0.0)

    spans = (
        EvidenceSpan(stream="a", start=4.0, end=8.0, source="recall", score=12.0),
        EvidenceSpan(stream="a", start=0.0, end=4.0, source="timeline", score=-1.5, row_id=7),
    )
    answer = Answer(stream="a", stats=AnswerStats(round=1, question="q?", answer="x", evidence=spans))
    record = to_record(answer)
    assert set(record) == ANSWER_RECORD_KEYS
    assert record["evidence"] == [
        {"stream": "a", "start": 4.0, "end": 8.0, "source": "recall", "score": 12.0},  # no row_id key
        {"stream": "a", "start": 0.0, "end": 4.0, "source": "timeline", "score": -1.5, "row_id": 7},
    ]
    assert from_record(record) == answer and answer.round == 1 and answer.question == "q?"


def test_a_login_in_an_answers_text_is_redacted_inside_its_stats():
    stats = AnswerStats(round=1, question="what is at rtsp://u:pw@cam/x?", answer="rtsp://u:pw@cam/x shows a car")
    clean = redacted(Answer(stream="a", stats=stats))
    assert "pw" not in clean.question and "pw" not in clean.answer and clean.stats.round == 1


class _Capture:
    def __init__(self, events):
        self.events = events

    def poll_events(self):
        events, self.events = self.events, []
        return events


def test_a_reconnection_is_its_own_kind_and_the_state_follows_the_kind_not_the_text():
    published = []
    bus = EventBus()
    bus.subscribe(published.append)
    stream = SimpleNamespace(name="door", state=StreamState.WATCHING, stream_time=3.0)
    stream.capture = _Capture(
        [
            CaptureEvent("reconnect", "reconnected? no: dropped; reconnecting", 3.0, 1.0),  # the text misleads
            CaptureEvent("warning", "skipped 2 bad packets", 3.0, 1.5),
            CaptureEvent("reconnected", "back after 2.0 s", 3.0, 2.0),
            CaptureEvent("error", "bad frame", 3.0, 2.5),
        ]
    )
    CaptureEvents(StreamEvents(bus)).forward(stream)
    changes = [(e.kind, e.state) for e in published if isinstance(e, CaptureChange)]
    assert changes == [
        (CaptureKind.DROPPED, StreamState.RECONNECTING),
        (CaptureKind.WARNING, StreamState.RECONNECTING),
        (CaptureKind.RECONNECTED, StreamState.WATCHING),
    ]
    assert [to_record(e)["kind"] for e in published if isinstance(e, CaptureChange)] == [
        "reconnect",
        "warning",
        "reconnected",
    ]
    assert [e.where for e in published if isinstance(e, ErrorEvent)] == ["capture"]
    assert stream.state is StreamState.WATCHING


def test_the_head_reports_what_a_hosts_outbox_dropped_once_per_new_drop(caplog):
    published = []
    head = SimpleNamespace(_dropped={}, bus=SimpleNamespace(publish=published.append))
    host = SimpleNamespace(name="h1")
    with caplog.at_level(logging.WARNING):
        for dropped in (0, 5, 5, 12):
            Coordinator._report_dropped(head, host, dropped)
    assert [(e.host, e.dropped, e.new) for e in published] == [("h1", 5, 5), ("h1", 12, 7)]
    assert all(isinstance(e, EventsDropped) for e in published)
    assert to_record(published[-1])["type"] == "events_dropped"
    assert "host h1 dropped 7 events (12 so far)" in caplog.text
