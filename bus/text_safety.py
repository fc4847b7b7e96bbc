"""Text from people, models and streams made safe to print on a terminal."""

from __future__ import annotations

import re

# Escape sequences a terminal acts on, removed whole: OSC (ESC ] ... BEL or ST: titles, OSC 8 hyperlinks,
# clipboard writes), DCS/SOS/PM/APC strings (ESC P|X|^|_ ... ST), CSI (ESC [ ... final byte: cursor moves,
# screen clears, colours) and their one-byte C1 forms (0x9d OSC, 0x90/0x98/0x9e/0x9f strings, 0x9b CSI), then
# the other two-byte escapes (ESC + one byte).
_SEQUENCES = re.compile(
    r"(?:\x1b\]|\x9d)[^\x07\x1b\x9c]*(?:\x07|\x1b\\|\x9c)?"
    r"|(?:\x1b[PX^_]|[\x90\x98\x9e\x9f])[^\x1b\x9c]*(?:\x1b\\|\x9c)?"
    r"|(?:\x1b\[|\x9b)[0-?]*[ -/]*[@-~]?"
    r"|\x1b[ -~]?"
)
# Bidirectional controls (embeddings and overrides U+202A-U+202E, isolates U+2066-U+2069, the marks U+200E/F and
# U+061C): they reorder what follows on the line, so a name or an answer can show another text than it holds
# ("Trojan Source"). Right-to-left letters themselves are kept.
BIDI_CONTROLS = "\u202a-\u202e\u2066-\u2069\u200e\u200f\u061c"
# What is left of C0 (but newline and tab), DEL, C1 and the bidi controls once the sequences are gone.
_CONTROLS = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f" + BIDI_CONTROLS + "]")


def printable(text: str) -> str:
    """`text` without C0/C1 control characters, bidi controls and ANSI/OSC escape sequences; newline and tab
    are kept.
    An unterminated sequence is removed to the end of its parameters, so a split sequence never reaches a
    terminal whole."""
    return _CONTROLS.sub("", _SEQUENCES.sub("", text))
