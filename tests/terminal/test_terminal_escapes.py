"""Terminal output never carries an escape sequence from questions, answers, stream names or messages."""

import io
import re

import pytest

from bus.text_safety import printable
from terminal.printer import TerminalPrinter
from tests.support.event_helpers import make_event

CLEAR = "\x1b[2J\x1b[H"
LINK = "\x1b]8;;https://example.invalid/x\x1b\\click\x1b]8;;\x1b\\"
TITLE = "\x1b]0;owned\x07"
C1_CSI = "\x9b31m"
ANY_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def hostile_events(stream: str) -> list[dict]:
    answer = {
        "round": 1, "stream_time": 4.0, "question": f"what{CLEAR}?", "answer": f"a door{LINK} opened{C1_CSI}",
        "ttft_s": 0.1, "decode_tokens_per_s": 10.0, "cache_tokens_before": 10, "cache_tokens_after": 12,
        "evict_ms": 0.1, "kv_bytes": 1024, "process_rss_bytes": 2**20,
    }  # fmt: skip
    return [
        make_event("status", stream=stream, message=f"watching rtsp://cam{TITLE}/live"),
        make_event("answer_start", stream=stream, auto=False, round=1, stream_time=4.0, question=f"what{CLEAR}?"),
        make_event("answer_piece", stream=stream, round=1, text="a door\x1b]8;;https://example.invalid/x\x1b\\"),
        make_event("answer_piece", stream=stream, round=1, text="click\x1b]8;;\x1b\\ opened\x1b"),
        make_event("answer_piece", stream=stream, round=1, text="[2J" + C1_CSI),
        make_event("answer", stream=stream, **answer),
        make_event("error", stream=stream, where="capture", message=f"cannot open {CLEAR}cam\r\x08\x08"),
        make_event("warning", stream=stream, where="ingest", message=f"slow{TITLE}"),
        make_event(
            "alert", stream=stream, id="door-1", alert=f"door{CLEAR}", state="begin", stream_time=8.0, p_yes=0.9
        ),
        make_event("capture", stream=stream, kind="reconnect", message=f"reconnected {LINK}", state="watching"),
        make_event("end", stream=stream, reason="eof", message=f"done{C1_CSI}", stream_time=8.0),
    ]


@pytest.mark.parametrize("several", [False, True])
def test_the_printer_prints_no_escape_sequence(several):
    out, err = io.StringIO(), io.StringIO()
    printer = TerminalPrinter(out=out, status_out=err, prefix_streams=several)
    for event in hostile_events(f"door{CLEAR}" if several else "cam"):
        printer(event)
    for text in (out.getvalue(), err.getvalue()):
        assert "\x1b" not in text and "\x9b" not in text and "\x07" not in text
        assert not ANY_CONTROL.search(text)
    assert "what?" in out.getvalue() and "door" in out.getvalue() and "click" in out.getvalue()
    assert "cannot open cam" in err.getvalue() and "watching rtsp://cam/live" in err.getvalue()


def test_printable_removes_whole_sequences_and_keeps_text():
    assert printable(f"a{CLEAR}b") == "ab"
    assert printable(f"see {LINK} now") == "see click now"
    assert printable(f"x{TITLE}y") == "xy"
    assert printable(f"r{C1_CSI}s\x9d8;;u\x9c") == "rs"
    assert printable("line one\n\tline two\r\x00\x7f") == "line one\n\tline two"
    assert printable("日本語 café ✓") == "日本語 café ✓"
