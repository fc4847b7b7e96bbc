"""Events for tests, written the way a record writes them: `make_event("status", stream=None, message=...)`.

Built through `bus.records.from_record` (the one place a record becomes a typed event), so a test names the
fields as the log does; frames (`preview`, `snapshot`), which records never hold, are set on the event after.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from bus import Event, from_record
from bus.records import UNRECORDED_FIELDS


def make_event(type_: str, **fields: Any) -> Event:
    frames = {key: fields.pop(key) for key in list(fields) if key in UNRECORDED_FIELDS}
    event = from_record({"type": type_, **fields})
    return dataclasses.replace(event, **frames) if frames else event
