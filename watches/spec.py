"""Which watches to keep: `--alert NAME="QUESTION"` flags and `[alerts.NAME]` tables of the --config file.
Pure parsing and validation; names follow the stream names' rule (safe in topics and file names)."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from bus.names import NAME_PATTERN, NAME_RULE

TABLE_KEYS = ("question", "streams", "every", "threshold", "on_after", "off_after", "cooldown", "on_change")
# other spellings a watch command may use (MQTT's, and the API's too): `stream` is one name of `streams`
SPELLINGS = {"stream": "streams", "every_s": "every"}


@dataclass(frozen=True)
class WatchSpec:
    """A yes/no question checked on some streams.

    streams: the streams it watches (None: every stream). every: seconds of stream time between checks.
    threshold: p_yes at or above it counts as yes (0 to 1). on_after / off_after: consecutive yes / no checks
    that begin / end an alert. cooldown: seconds of stream time after an end before it may begin again.
    on_change: skip a due check when the stream did not change since the last check (watches.gate).
    """

    name: str
    question: str
    streams: tuple[str, ...] | None = None
    every: float = 10.0
    threshold: float = 0.5
    on_after: int = 2
    off_after: int = 2
    cooldown: float = 30.0
    on_change: bool = False

    def __post_init__(self) -> None:
        where = f"alert {self.name!r}"
        if not isinstance(self.name, str) or not NAME_PATTERN.fullmatch(self.name):
            raise ValueError(f"bad alert name {self.name!r}: use {NAME_RULE}")
        if not isinstance(self.question, str) or not self.question.strip():
            raise ValueError(f"{where}: the question must be a non-empty string")
        if not _number(self.every) or self.every <= 0:
            raise ValueError(f"{where}: every must be a number of seconds > 0, got {self.every!r}")
        if not _number(self.threshold) or not 0.0 <= self.threshold <= 1.0:
            raise ValueError(f"{where}: threshold must be between 0 and 1, got {self.threshold!r}")
        for key in ("on_after", "off_after"):
            value = getattr(self, key)
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise ValueError(f"{where}: {key} must be a whole number of checks >= 1, got {value!r}")
        if not _number(self.cooldown) or self.cooldown < 0:
            raise ValueError(f"{where}: cooldown must be a number of seconds >= 0, got {self.cooldown!r}")
        if not isinstance(self.on_change, bool):
            raise ValueError(f"{where}: on_change must be true or false, got {self.on_change!r}")
        if self.streams is not None and (
            not self.streams or not all(isinstance(s, str) and NAME_PATTERN.fullmatch(s) for s in self.streams)
        ):
            raise ValueError(f"{where}: streams must be a non-empty list of stream names, got {self.streams!r}")

    def watches(self, stream: str) -> bool:
        return self.streams is None or stream in self.streams


def _number(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def respelled(settings: Mapping[str, Any]) -> dict[str, Any]:
    """`settings` with the other spellings as WatchSpec's: `stream` (one name) as `streams` ([name]), `every_s`
    as `every`. ValueError when one setting is given in both spellings."""
    settings = dict(settings)
    for alias, key in SPELLINGS.items():
        if alias in settings:
            if key in settings:
                raise ValueError(f"give {alias} or {key}, not both")
            value = settings.pop(alias)
            settings[key] = [value] if key == "streams" else value
    return settings


def parse_alert_flag(text: str, every: float | None = None, on_change: bool = False) -> WatchSpec:
    """`NAME=QUESTION` (every other setting at its default; `every` from --alert-every when given, `on_change`
    from --alert-on-change)."""
    name, sep, question = text.partition("=")
    if not sep or not question.strip():
        raise ValueError(f'--alert takes NAME="QUESTION" (e.g. person="Is there a person?"), got {text!r}')
    return WatchSpec(name.strip(), question.strip(), on_change=on_change, **({} if every is None else {"every": every}))


def specs_from_table(table: object) -> list[WatchSpec]:
    """The `[alerts.NAME]` tables: question (required), streams, every, threshold, on_after, off_after, cooldown,
    on_change."""
    if not isinstance(table, dict):
        raise ValueError('alerts in --config must be tables: [alerts.NAME] with question = "..."')
    specs = []
    for name, settings in table.items():
        if not isinstance(settings, dict) or "question" not in settings:
            raise ValueError(f'[alerts.{name}] must be a table with question = "..."')
        unknown = sorted(set(settings) - set(TABLE_KEYS))
        if unknown:
            allowed = ", ".join(TABLE_KEYS)
            raise ValueError(f"[alerts.{name}]: unknown setting(s) {', '.join(unknown)}; allowed: {allowed}")
        values = dict(settings)
        if "streams" in values:
            if not isinstance(values["streams"], list):
                raise ValueError(f"[alerts.{name}]: streams must be a list of stream names")
            values["streams"] = tuple(values["streams"])
        specs.append(WatchSpec(name, **values))
    return specs


def check_streams(specs: list[WatchSpec], streams: list[str]) -> list[WatchSpec]:
    """The specs, refusing a repeated alert name or a stream that is not configured."""
    seen: set[str] = set()
    for spec in specs:
        if spec.name in seen:
            raise ValueError(f"alert name {spec.name!r} is given twice")
        seen.add(spec.name)
        missing = [s for s in spec.streams or () if s not in streams]
        if missing:
            known = ", ".join(streams) or "none configured"
            raise ValueError(f"alert {spec.name!r} names unknown stream(s) {', '.join(missing)}; streams: {known}")
    return specs
