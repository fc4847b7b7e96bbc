"""The page's "Watch for" section as plain methods (no Gradio): add a yes/no watch ("tell me when ...") and end
one, through a `WatchCommands` the app passes in (`watches.runtime.RuntimeWatches`: the same watches the API,
MQTT commands and the terminal set, with the same limits, kept across restarts). Each method returns a `Feedback`
for the person who clicked; a refusal is also a line of the page's activity log, as every refused command is.

`watches_html` renders the list (configured watches too, marked so: only the TOML and --alert change those);
`describe` is one watch as a line of text (the terminal's `watches` prints them).
"""

from __future__ import annotations

import html
import logging
import math
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol

from ui.controls import ALL_STREAMS, Feedback, stream_choice

logger = logging.getLogger(__name__)

EVERY = "every N s"
ON_CHANGE = "every N s, when the picture changed"
CHECK_MODES = (EVERY, ON_CHANGE)
PAGE_OWNER = "page"
TABLE_CSS = """
.watches-table { border-collapse: collapse; width: 100%; font-size: 0.9em; }
.watches-table th, .watches-table td { border-bottom: 1px solid #e5e7eb; padding: 4px 8px; text-align: left; }
.watches-table tr.configured td { color: #6b7280; }
"""
NO_WATCHES = '<p class="watches-empty"><i>No watches yet: add one above.</i></p>'


class SpecView(Protocol):
    """What is shown of a watch's settings (`watches.spec.WatchSpec`)."""

    name: str
    question: str
    streams: tuple[str, ...] | None
    every: float
    on_change: bool


class WatchView(Protocol):
    """A runtime watch (`watches.runtime.RuntimeWatch`): its spec, who set it, its expiry (wall clock)."""

    spec: SpecView
    owner: str
    expires_at: float | None
    one_shot: bool


class WatchCommands(Protocol):
    """What the section needs of `watches.runtime.RuntimeWatches`. add/remove raise ValueError (a bad
    setting, an unknown stream or watch, a name in use, a limit reached) with a message for people."""

    configured: Mapping[str, SpecView]

    def list(self) -> Sequence[WatchView]: ...

    def add(
        self, settings: dict[str, Any], owner: str = "", expires_in_s: float | None = None, one_shot: bool = False
    ) -> WatchView: ...

    def remove(self, name: str, reason: str = "removed") -> WatchView: ...


def wall_clock(t_wall: float) -> str:
    return time.strftime("%H:%M:%S", time.localtime(t_wall))


def checks_text(spec: SpecView) -> str:
    """every 5 s (of stream time), or every 5 s when the picture changed."""
    text = f"every {spec.every:g} s"
    return f"{text} when the picture changed" if spec.on_change else text


def ends_text(watch: WatchView | None) -> str:
    """When it ends by itself: at its first alert, at a time, both, or never (None: a configured watch)."""
    if watch is None:
        return "never (configured at start)"
    parts = ["at its first alert"] if watch.one_shot else []
    if watch.expires_at is not None:
        parts.append(f"at {wall_clock(watch.expires_at)}")
    return " or ".join(parts) if parts else "when ended"


def streams_text(spec: SpecView) -> str:
    return ALL_STREAMS if spec.streams is None else ", ".join(spec.streams)


def describe(watch: WatchView) -> str:
    """One line: name, question, streams, checks, end, who set it."""
    spec = watch.spec
    return (
        f"{spec.name}: “{spec.question}” on {streams_text(spec)}, {checks_text(spec)}; ends {ends_text(watch)}; "
        f"set by {watch.owner or 'unknown'}"
    )


def watches_html(configured: Sequence[SpecView], runtime: Sequence[WatchView]) -> str:
    """The list: configured watches first (greyed: changed only at start), then the runtime ones, oldest first."""
    if not configured and not runtime:
        return NO_WATCHES
    rows = [_row(spec, None) for spec in configured] + [_row(w.spec, w) for w in runtime]
    head = "<tr><th>name</th><th>question</th><th>streams</th><th>checks</th><th>ends</th><th>set by</th></tr>"
    return f'<table class="watches-table">{head}{"".join(rows)}</table>'


def _row(spec: SpecView, watch: WatchView | None) -> str:
    cells = (spec.name, spec.question, streams_text(spec), checks_text(spec), ends_text(watch))
    owner = "configured" if watch is None else watch.owner or "unknown"
    attrs = 'class="configured"' if watch is None else f'class="watch-row" data-watch="{html.escape(spec.name)}"'
    return f"<tr {attrs}>{''.join(f'<td>{html.escape(c)}</td>' for c in (*cells, owner))}</tr>"


class WatchForm:
    """The section's commands, from every browser tab (RuntimeWatches is thread-safe). note: the page's activity
    log (`LiveState.note`), where refusals go too; owner: what the watches it adds say set them."""

    def __init__(
        self,
        watches: WatchCommands,
        note: Callable[[str, str, float], None] | None = None,
        owner: str = PAGE_OWNER,
    ) -> None:
        self.watches = watches
        self.note = note
        self.owner = owner

    def add(
        self,
        question: str | None,
        stream: str | None,
        mode: str | None,
        every_s: float | None,
        expires_min: float | None = None,
        one_shot: bool = False,
        name: str | None = None,
    ) -> Feedback:
        """A watch of `question` on `stream` (a name; None or "all streams": every stream), checked every
        `every_s` seconds of stream time (mode ON_CHANGE: only when the picture changed since the last check),
        ending by itself after `expires_min` minutes (None or 0: never) and, with `one_shot`, at its first alert.
        `name`: made when empty."""
        text = (question or "").strip()
        try:
            if not text:
                raise ValueError("type the yes/no question to watch for first (e.g. Is there a person at the door?)")
            if mode not in CHECK_MODES:
                raise ValueError(f"choose how often it is checked: {' or '.join(CHECK_MODES)}")
            if every_s is None:
                raise ValueError("give how often it is checked, in seconds of stream time (e.g. 10)")
            expires_in_s = _expiry_s(expires_min)
            target = stream_choice(stream)
            settings: dict[str, Any] = {
                "question": text,
                "streams": None if target is None else [target],
                "every": float(every_s),
                "on_change": mode == ON_CHANGE,
            }
            if name and name.strip():
                settings["name"] = name.strip()
            watch = self.watches.add(settings, owner=self.owner, expires_in_s=expires_in_s, one_shot=bool(one_shot))
        except ValueError as err:
            return self._refuse(f"cannot add the watch: {err}")
        return Feedback(True, f"watching: {describe(watch)}")

    def end(self, name: str | None) -> Feedback:
        """Ends the runtime watch `name` (its alert, if on, ends with it)."""
        try:
            if not name:
                raise ValueError("choose the watch to end first")
            self.watches.remove(name)
        except ValueError as err:
            return self._refuse(f"cannot end the watch: {err}")
        return Feedback(True, f"watch {name} ended")

    def names(self) -> list[str]:
        """The runtime watches' names, oldest first: those End can end."""
        return [watch.spec.name for watch in self.watches.list()]

    def html(self) -> str:
        return watches_html(list(self.watches.configured.values()), self.watches.list())

    def _refuse(self, message: str) -> Feedback:
        logger.info("refused: %s", message)
        if self.note is not None:
            self.note("error", message, time.time())
        return Feedback(False, message)


def _expiry_s(minutes: float | None) -> float | None:
    """The expiry box (minutes; empty or 0: never) in seconds."""
    if minutes is None or minutes == 0:
        return None
    if not isinstance(minutes, (int, float)) or not math.isfinite(minutes) or minutes < 0:
        raise ValueError(f"the expiry is a number of minutes > 0 (0 or empty: never), got {minutes!r}")
    return float(minutes) * 60.0
