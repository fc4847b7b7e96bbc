"""Watches typed in the terminal, next to the questions (terminal.stdin_questions):

    watch for: QUESTION [every 5s] [on change] [once] [for 10m] [threshold 0.7] [as NAME]
    NAME: watch for: QUESTION ...      (that stream only; without it, every stream)
    watches                            (lists them)
    unwatch NAME                       (ends one)

The options come after the question, in any order, with or without the brackets: `every` seconds of stream time
between checks (s, m or h; default 10 s), `on change` (a due check is skipped when the picture did not change),
`once` (it ends at its first alert), `for` how long it lasts (s, m, h or d; default: until unwatched), `threshold`
p_yes that counts as yes, `as` its name (default: one is made). They go to `watches.runtime.RuntimeWatches`
owned by "terminal": the same watches, limits and state file as the API's and the page's.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ui.watch_form import describe
from watches.runtime import RuntimeWatches

TERMINAL_OWNER = "terminal"
PREFIX = re.compile(r"^\s*watch\s+for\s*:\s*", re.IGNORECASE)
UNITS = {"": 1.0, "s": 1.0, "sec": 1.0, "m": 60.0, "min": 60.0, "h": 3600.0, "d": 86400.0}
NUMBER = r"(\d+(?:\.\d+)?)"
_AT = r"(?:^|(?<=\s))\[?\s*"  # an option starts the line or follows a space; its brackets are optional
OPTIONS = {  # each matched at the end of the line, then taken off it
    "every": re.compile(rf"{_AT}every\s+{NUMBER}\s*(s|sec|m|min|h)?\s*\]?$", re.IGNORECASE),
    "on_change": re.compile(_AT + r"on\s+change\s*\]?$", re.IGNORECASE),
    "once": re.compile(_AT + r"once\s*\]?$", re.IGNORECASE),
    "for": re.compile(rf"{_AT}for\s+{NUMBER}\s*(s|sec|m|min|h|d)?\s*\]?$", re.IGNORECASE),
    "threshold": re.compile(rf"{_AT}threshold\s+{NUMBER}\s*\]?$", re.IGNORECASE),
    "as": re.compile(_AT + r"as\s+([a-z0-9][a-z0-9_-]*)\s*\]?$", re.IGNORECASE),
}
USAGE = "watch for: QUESTION [every 5s] [on change] [once] [for 10m] [threshold 0.7] [as NAME]"


@dataclass(frozen=True)
class TypedWatch:
    """settings: RuntimeWatches.add's (question, every, on_change, threshold, name, streams); expires_in_s: None
    for until unwatched."""

    settings: dict[str, Any] = field(default_factory=dict)
    expires_in_s: float | None = None
    one_shot: bool = False


def parse_watch(text: str, stream: str | None = None) -> TypedWatch:
    """The watch of a `watch for: ...` line (`text` with or without the `watch for:`), on `stream` (None: every
    stream). ValueError naming the form for an empty question or an option given twice."""
    rest = PREFIX.sub("", text, count=1).strip()
    found: dict[str, re.Match[str]] = {}
    while True:
        for key, pattern in OPTIONS.items():
            match = pattern.search(rest)
            if match is not None:
                if key in found:
                    raise ValueError(f"{key.replace('_', ' ')} is given twice; type {USAGE}")
                found[key] = match
                rest = rest[: match.start()].rstrip()
                break
        else:
            break
    if not rest:
        raise ValueError(f"type the yes/no question after 'watch for:': {USAGE}")
    settings: dict[str, Any] = {"question": rest, "streams": None if stream is None else [stream]}
    if "every" in found:
        settings["every"] = _seconds(found["every"])
    if "on_change" in found:
        settings["on_change"] = True
    if "threshold" in found:
        settings["threshold"] = float(found["threshold"].group(1))
    if "as" in found:
        settings["name"] = found["as"].group(1)
    expires = _seconds(found["for"]) if "for" in found else None
    return TypedWatch(settings, expires, "once" in found)


def _seconds(match: re.Match[str]) -> float:
    return float(match.group(1)) * UNITS[(match.group(2) or "").lower()]


class TerminalWatches:
    """What a typed line does when it is a watch command (`__call__` returns True; False: it is a question).
    Says what happened, or why not, through `say`."""

    def __init__(self, watches: RuntimeWatches, say: Callable[[str], None], owner: str = TERMINAL_OWNER) -> None:
        self.watches = watches
        self.say = say
        self.owner = owner

    def __call__(self, line: str, stream: str | None = None) -> bool:
        text = line.strip()
        word = text.lower()
        if PREFIX.match(text):
            self.add(text, stream)
        elif word == "watches":
            self.list()
        elif word == "unwatch" or word.startswith("unwatch "):
            self.end(text[len("unwatch") :].strip())
        else:
            return False
        return True

    def add(self, text: str, stream: str | None) -> None:
        try:
            typed = parse_watch(text, stream)
            watch = self.watches.add(
                typed.settings, owner=self.owner, expires_in_s=typed.expires_in_s, one_shot=typed.one_shot
            )
        except ValueError as err:
            self.say(f"cannot add the watch: {err}")
            return
        self.say(f"watching: {describe(watch)} (type 'unwatch {watch.spec.name}' to end it)")

    def list(self) -> None:
        configured = [
            f"  {spec.name}: “{spec.question}” (configured at start)" for spec in self.watches.configured.values()
        ]
        runtime = [f"  {describe(watch)}" for watch in self.watches.list()]
        if not configured and not runtime:
            self.say(f"no watches; add one: {USAGE}")
            return
        self.say("\n".join(["watches:", *configured, *runtime]))

    def end(self, name: str) -> None:
        try:
            if not name:
                raise ValueError("type unwatch NAME (the names: type 'watches')")
            self.watches.remove(name)
        except ValueError as err:
            self.say(f"cannot end the watch: {err}")
            return
        self.say(f"watch {name} ended")


def refused_watches(say: Callable[[str], None], why: str) -> Callable[[str, str | None], bool]:
    """A terminal that cannot set watches (a fleet's head): its watch commands are said to be refused, `why`,
    instead of being asked as questions."""

    def refuse(line: str, stream: str | None = None) -> bool:
        text = line.strip()
        word = text.lower()
        if PREFIX.match(text) or word == "watches" or word == "unwatch" or word.startswith("unwatch "):
            say(f"watches cannot be set here: {why}")
            return True
        return False

    return refuse
