"""Typed events and their records (`bus/`): every type turns into its JSON record and back unchanged, a real
`python -m app --model tiny` log reads back into typed events, older logs (no version, no status kind) still
read, and whatever acts on a status matches on its kind, never on its text."""

import io
import json

import numpy as np
import pytest

from bus import (
    EVENT_TYPES,
    RECORD_VERSION,
    Alert,
    Answer,
    AnswerPiece,
    AnswerStart,
    AnswerStats,
    CaptureChange,
    CaptureKind,
    Check,
    ClipEvent,
    ClipStats,
    End,
    ErrorEvent,
    EventsDropped,
    EvidenceSpan,
    Status,
    StatusKind,
    StreamState,
    WarningEvent,
    WatchEvent,
    from_record,
    read_log,
    to_record,
)
from bus.clock import clock, merge_evidence, span
from bus.records import evidence_from_records
from terminal.printer import TerminalPrinter
from tests.support.app_helpers import video
from tests.support.in_process_main import run_main
from ui.state import LiveState

ONE_OF_EACH = [
    Status(kind=StatusKind.READY, message="assistant ready"),
    Status(stream="door", kind=StatusKind.STREAM_REMOVED, message="stream removed"),
    ClipEvent(stream="door", index=3, stream_time=16.0, t_start=12.0,
              stats=ClipStats(frames=4, visual_tokens=64, visual_tokens_kept=9, cache_tokens=120,
                              store_oldest_time=None),
              budget=256, preview=np.zeros((2, 2, 3), np.uint8)),
    AnswerStart(stream="door", round=2, question="what now?", auto=True, stream_time=16.0),
    AnswerPiece(stream="door", round=2, text="a c"),
    Answer(stream="door", stats=AnswerStats(round=2, question="what now?", answer="a car", ttft_s=0.5,
                                            cache_tokens_end=130,
                                            evidence=(EvidenceSpan(stream="door", start=4.0, end=8.0, source="recall",
                                                                   score=0.5),))),
    ErrorEvent(stream="door", where="clip", message="clip 3 failed", stream_time=16.0),
    WarningEvent(where="ingest", message="slow"),
    CaptureChange(stream="door", kind=CaptureKind.DROPPED, message="lost", state=StreamState.RECONNECTING),
    End(stream="door", reason="eof", message="ended", stream_time=40.0),
    Check(stream="door", alert="person", p_yes=0.75, ms=12.5, stream_time=16.0, skipped_checks=2),
    Alert(stream="door", id="door-person-1", alert="person", state="begin", p_yes=0.9, stream_time=16.0,
          question="a person?", snapshot=b"\xff\xd8jpeg", snapshot_bytes=6),
    EventsDropped(host="h1", dropped=12, new=5),
    WatchEvent(stream="door", alert="parcel", change="ended", reason="expired"),
]  # fmt: skip


def test_every_type_is_covered_and_each_record_reads_back_as_the_same_event():
    assert {type(e) for e in ONE_OF_EACH} == set(EVENT_TYPES.values())
    for event in ONE_OF_EACH:
        record = json.loads(json.dumps(to_record(event)))  # through JSON text, as a log line
        assert record["type"] == event.TYPE and record["v"] == RECORD_VERSION
        assert "preview" not in record and "snapshot" not in record  # frames never leave in a record
        back = from_record(record)
        assert type(back) is type(event) and back == event  # frames are not compared (compare=False)
    assert to_record(ONE_OF_EACH[0])["kind"] == "ready"
    assert to_record(ONE_OF_EACH[1])["removed"] is True  # what older readers of a removal looked for


def test_an_older_record_without_version_or_kind_still_reads_and_bad_records_say_why():
    old = from_record({"type": "status", "stream": None, "t_wall": 1.5, "message": "assistant stopped"})
    assert old == Status(kind=StatusKind.STOPPED, message="assistant stopped", t_wall=1.5)
    removed = from_record(
        {"type": "status", "stream": "b", "t_wall": 2.0, "message": "stream removed", "removed": True}
    )
    assert removed.kind is StatusKind.STREAM_REMOVED
    newer = from_record({"type": "check", "alert": "a", "p_yes": 0.5, "a_field_from_later": 1})  # ignored
    assert newer.alert == "a" and newer.p_yes == 0.5
    with pytest.raises(ValueError, match="unknown event type 'telemetry'"):
        from_record({"type": "telemetry"})
    with pytest.raises(ValueError, match="lacks a field"):
        from_record({"type": "clip", "stream_time": 4.0})  # no index


def test_a_real_log_of_the_tiny_model_reads_back_into_typed_events(tmp_path, capsys):
    log = tmp_path / "run.jsonl"
    code, err = run_main(
        capsys, "--video", str(video(16)), "--model", "tiny", "--no-realtime", "--every", "8", "--budget", "192",
        "--window", "8", "--max-new-tokens", "4", "--quiet", "--log-jsonl", str(log),
    )  # fmt: skip
    assert code == 0, err[-2000:]
    lines = [json.loads(line) for line in log.read_text().splitlines()]
    events = list(read_log(log))
    assert len(events) == len(lines) and all(line["v"] == RECORD_VERSION for line in lines)
    # each line is exactly the record of the event it reads back into: nothing lost, nothing added
    assert [to_record(e) for e in events] == lines
    assert [e.stream_time for e in events if isinstance(e, Answer)] == [8.0, 16.0]
    assert [e.index for e in events if isinstance(e, ClipEvent)] == [0, 1, 2, 3]
    kinds = [e.kind for e in events if isinstance(e, Status)]
    assert kinds[0] is StatusKind.MEMORY_MONITOR and StatusKind.READY in kinds and kinds[-1] is StatusKind.STOPPED
    assert any(isinstance(e, End) for e in events)


def test_the_page_and_the_printer_act_on_the_kind_not_on_the_text():
    live = LiveState(streams=["a", "b"])
    live(Status(stream="a", kind=StatusKind.STREAM_WATCHING, message="now looking at cam-a"))
    assert live.snapshot().streams[0].state == "watching"
    live(Status(kind=StatusKind.STOPPED, message="bye for now"))  # reworded: still the stop
    assert [v.state for v in live.snapshot().streams] == ["idle", "idle"]
    live(Status(stream="b", kind=StatusKind.INFO, message="stream removed"))  # the text alone removes nothing
    assert [v.name for v in live.snapshot().streams] == ["a", "b"]
    live(Status(stream="b", kind=StatusKind.STREAM_REMOVED, message="gone"))
    assert [v.name for v in live.snapshot().streams] == ["a"]


def test_one_clock_one_answer_for_unknown_and_one_span_merger():
    assert clock(760.9) == "00:12:40" and clock(90061) == "25:01:01" and clock(-3) == "00:00:00"
    assert clock(None) == span(None, None) == "--:--:--"
    assert span(760.0, 764.9) == "00:12:40-00:12:44" and span(None, 8.0) == "00:00:08"
    spans = merge_evidence(
        evidence_from_records(
            [
                {"stream": "a", "start": 8.0, "end": 12.0, "source": "recall"},
                {"stream": "a", "start": 4.0, "end": 8.0, "source": "recall"},
                {"stream": "a", "start": 20.0, "end": 24.0, "source": "recall"},
                {"stream": "a", "start": "x", "end": 1.0, "source": "recall"},  # not a number: skipped
            ]
        )
    )
    assert [s.label for s in spans] == ["00:00:04-00:00:12 (recall)", "00:00:20-00:00:24 (recall)"]


def test_the_printer_reads_typed_events():
    out_file, err_file = io.StringIO(), io.StringIO()
    printer = TerminalPrinter(out=out_file, status_out=err_file, show_clips=True)
    for event in ONE_OF_EACH:
        printer(event)
    out, err = out_file.getvalue(), err_file.getvalue()
    assert "round 2 · t=16.0s · auto: what now?" in out and "seen at 00:00:04-00:00:08 (recall)" in out
    assert "▲ ALERT person began at t=16.0s (p_yes 0.90)" in out
    assert "· clip 3 [12.0-16.0s] 4 frames, kept 14% (9/64), cache 120/256 tokens" in err
    assert "! error (clip): clip 3 failed" in err and "· end of stream: ended" in err
