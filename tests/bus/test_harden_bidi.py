"""Bidirectional controls are neutralised wherever text is printed (issue 39): a U+202E (right-to-left override)
in a stored question made `history` show `txt.exe` for `exe.txt`-style spoofs (Trojan Source)."""

from __future__ import annotations

import json
import re

import pytest

from bus.text_safety import printable
from terminal.history import format_moment, json_line
from timeline.reader import Moment

BIDI = [
    "\u202a",
    "\u202b",
    "\u202c",
    "\u202d",
    "\u202e",
    "\u2066",
    "\u2067",
    "\u2068",
    "\u2069",
    "\u200e",
    "\u200f",
    "\u061c",
]


@pytest.mark.parametrize("control", BIDI)
def test_printable_removes_bidi_controls(control: str) -> None:
    assert printable(f"is the door open{control}?nepo rood") == "is the door open?nepo rood"


def test_printable_keeps_right_to_left_text() -> None:
    assert printable("שלום عليكم") == "שלום عليكم"


def _moment(question: str, answer: str) -> Moment:
    return Moment(id=1, kind="answer", stream="door\u202e", t_wall=0.0, start_s=1.0, end_s=2.0, question=question,
                  text=answer, who="person", p_yes=None, alert=None, state=None, has_thumbnail=False)  # fmt: skip


def test_history_shows_no_bidi_override() -> None:
    moment = _moment("what is in \u202eview\u2066?", "a \u200fcat\u061c")
    line = format_moment(moment)
    assert not re.search("[\u202a-\u202e\u2066-\u2069\u200e\u200f\u061c]", line), ascii(line)
    assert "what is in view? A: a cat" in line and "door" in line
    raw = json_line(moment)  # --json keeps the text, escaped
    assert not re.search("[\u202a-\u202e\u2066-\u2069\u200e\u200f\u061c]", raw), raw
    assert json.loads(raw)["question"] == "what is in \u202eview\u2066?"
