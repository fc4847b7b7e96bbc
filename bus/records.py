"""The one place an event becomes its JSON record and a record becomes an event again.

A record is a flat dict: `type`, `v` (the record version, `RECORD_VERSION`), `stream`, `t_wall` and the event's
own fields under the names they always had, so a log written before records had a version reads the same in
today's tools. A clip's and an answer's `stats` (`bus.stats`) are flattened into the record (their fields beside
the event's own; `metadata` says which stay out and to how many decimals a figure is kept), and an answer's
evidence spans are a list of objects (`row_id` only where a timeline note has one). Frames (a clip's `preview`,
an alert's `snapshot` JPEG) are never in a record. A status record also says `removed: true` when a stream was
removed (older readers looked for it).

`from_record` reads both: a record without `v` (an older log) or with fields it does not know (a newer one)
still becomes an event; unknown fields are left out and missing ones take their defaults.
"""

from __future__ import annotations

import dataclasses
import enum
import functools
import json
import typing
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from bus.events import EVENT_TYPES, Event, Status, StatusKind
from bus.stats import EvidenceSpan

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
    """The event as a JSON-ready dict (stats flattened, evidence spans as dicts; frames left out)."""
    record: dict[str, Any] = {"type": event.TYPE, "v": RECORD_VERSION}
    _flatten(event, record)
    if isinstance(event, Status) and event.kind is StatusKind.STREAM_REMOVED:
        record["removed"] = True
    return record


def _flatten(value: Any, record: dict[str, Any]) -> None:
    """The fields of dataclass `value` into `record`; a field that is itself a dataclass (stats) adds its own."""
    for f in dataclasses.fields(value):
        if f.name in UNRECORDED_FIELDS or not f.metadata.get("record", True):
            continue
        item = getattr(value, f.name)
        if dataclasses.is_dataclass(item):
            _flatten(item, record)
            continue
        if isinstance(item, enum.Enum):
            item = item.value
        elif isinstance(item, float) and "digits" in f.metadata:
            item = round(item, f.metadata["digits"])
        elif isinstance(item, tuple) and all(isinstance(span, EvidenceSpan) for span in item):
            item = [evidence_record(span) for span in item]
        record[f.name] = item


def evidence_record(span: EvidenceSpan) -> dict[str, Any]:
    """{stream, start, end, source, score[, row_id]}: an evidence span as records (and the timeline) hold it."""
    record = dataclasses.asdict(span)
    if span.row_id is None:
        del record["row_id"]
    return record


def evidence_from_records(items: Any) -> tuple[EvidenceSpan, ...]:
    """The spans of a record's `evidence` list; items that are not objects with numeric start and end (a damaged
    or foreign log) are left out."""
    spans = []
    for item in items if isinstance(items, list) else ():
        if not isinstance(item, dict):
            continue
        fields = {key: value for key, value in item.items() if key in _EVIDENCE_FIELDS}
        if not all(isinstance(fields.get(key), (int, float)) for key in ("start", "end")):
            continue
        fields["source"] = str(fields.get("source", "?"))
        if not isinstance(fields.get("row_id"), int):
            fields.pop("row_id", None)
        spans.append(EvidenceSpan(**fields))
    return tuple(spans)


_EVIDENCE_FIELDS = frozenset(f.name for f in dataclasses.fields(EvidenceSpan))


def from_record(record: dict[str, Any]) -> Event:
    """The event a record holds. Raises ValueError for a record that is not a dict or names no known type."""
    if not isinstance(record, dict):
        raise ValueError(f"a record is a JSON object, got {type(record).__name__}")
    cls = EVENT_TYPES.get(record.get("type"))  # type: ignore[arg-type]
    if cls is None:
        raise ValueError(f"unknown event type {record.get('type')!r}; known: {', '.join(sorted(EVENT_TYPES))}")
    try:
        fields = _unflatten(cls, record)
        if cls is Status:
            fields["kind"] = _status_kind(record)
        return cls(**fields)
    except TypeError as err:  # a required field is missing
        raise ValueError(f"a {cls.TYPE} record lacks a field: {err}") from err


def _unflatten(cls: type, record: dict[str, Any]) -> dict[str, Any]:
    """The keyword arguments of `cls` found in flat `record`; a dataclass-typed field (stats) is built from the
    same record."""
    fields: dict[str, Any] = {}
    for f in dataclasses.fields(cls):
        if f.name in UNRECORDED_FIELDS or not f.metadata.get("record", True):
            continue
        nested = _hints(cls).get(f.name)
        if dataclasses.is_dataclass(nested):
            fields[f.name] = nested(**_unflatten(nested, record))
        elif f.name in record:
            value = record[f.name]
            fields[f.name] = evidence_from_records(value) if f.name == "evidence" else value
    return fields


@functools.cache
def _hints(cls: type) -> dict[str, Any]:
    return typing.get_type_hints(cls)


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
