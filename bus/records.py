"""The one place an event becomes its JSON record and a record becomes an event again.

A record is a flat dict: `type`, `v` (the record version, `RECORD_VERSION`), `stream`, `t_wall` and the event's
own fields under the names they always had, so a log written before records had a version reads the same in
today's tools. Frames (a clip's `preview`, an alert's `snapshot` JPEG) are never in a record. A status record
also says `removed: true` when a stream was removed (older readers looked for it).

`from_record` reads both: a record without `v` (an older log) or with fields it does not know (a newer one)
still becomes an event; unknown fields are left out and missing ones take their defaults.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from bus.events import EVENT_TYPES, Event, Status, StatusKind

RECORD_VERSION = 1
UNRECORDED_FIELDS = frozenset({"preview", "snapshot"})  # frames: for live displays only
# an older log's status records had no kind: their text said it (whole texts, then beginnings)
_OLD_STATUS_TEXT = {
    "assistant ready": StatusKind.READY,
    "assistant stopped": StatusKind.STOPPED,
    "stream stopped": StatusKind.STREAM_STOPPED,
    "stream removed": StatusKind.STREAM_REMOVED,
}
_OLD_STATUS_START = (
    ("watching ", StatusKind.STREAM_WATCHING),
    ("stream added", StatusKind.STREAM_ADDED),
    ("memory reset", StatusKind.MEMORY_RESET),
    ("memory monitor", StatusKind.MEMORY_MONITOR),
    ("run finished", StatusKind.RUN_FINISHED),
    ("reached --duration", StatusKind.DURATION_REACHED),
)


def to_record(event: Event) -> dict[str, Any]:
    """The event as a JSON-ready dict (nested evidence dicts are copied; frames left out)."""
    record: dict[str, Any] = {"type": event.TYPE, "v": RECORD_VERSION}
    for f in dataclasses.fields(event):
        if f.name in UNRECORDED_FIELDS:
            continue
        value = getattr(event, f.name)
        if isinstance(value, StatusKind):
            value = value.value
        elif isinstance(value, list):
            value = [dict(v) if isinstance(v, dict) else v for v in value]
        record[f.name] = value
    if isinstance(event, Status) and event.kind is StatusKind.STREAM_REMOVED:
        record["removed"] = True
    return record


def from_record(record: dict[str, Any]) -> Event:
    """The event a record holds. Raises ValueError for a record that is not a dict or names no known type."""
    if not isinstance(record, dict):
        raise ValueError(f"a record is a JSON object, got {type(record).__name__}")
    cls = EVENT_TYPES.get(record.get("type"))  # type: ignore[arg-type]
    if cls is None:
        raise ValueError(f"unknown event type {record.get('type')!r}; known: {', '.join(sorted(EVENT_TYPES))}")
    names = {f.name for f in dataclasses.fields(cls)} - UNRECORDED_FIELDS
    fields = {key: value for key, value in record.items() if key in names}
    if cls is Status:
        fields["kind"] = _status_kind(record)
    try:
        return cls(**fields)
    except TypeError as err:  # a required field is missing
        raise ValueError(f"a {cls.TYPE} record lacks a field: {err}") from err


def _status_kind(record: dict[str, Any]) -> StatusKind:
    kind = record.get("kind")
    if kind is not None:
        try:
            return StatusKind(kind)
        except ValueError:
            return StatusKind.INFO
    if record.get("removed"):
        return StatusKind.STREAM_REMOVED
    message = str(record.get("message", ""))
    if message in _OLD_STATUS_TEXT:
        return _OLD_STATUS_TEXT[message]
    return next((kind for start, kind in _OLD_STATUS_START if message.startswith(start)), StatusKind.INFO)


def to_json(event: Event) -> str:
    """One line of the event log."""
    return json.dumps(to_record(event), ensure_ascii=False, default=str)


def read_log(path: Path) -> Iterator[Event]:
    """The events of a JSON-lines log, in order. Blank lines are skipped; a line that is not a record of a known
    type raises ValueError naming the line."""
    with open(path, encoding="utf-8") as lines:
        for number, line in enumerate(lines, 1):
            if not line.strip():
                continue
            try:
                yield from_record(json.loads(line))
            except (ValueError, json.JSONDecodeError) as err:
                raise ValueError(f"{path}:{number}: {err}") from err
