"""Events on their way from a host to the head: the event's record (`bus.records`, the one JSON contract) plus
its pictures, which records leave out. A clip's preview travels shrunk (PREVIEW_WIDTH wide: enough for the
page's live view and the timeline's thumbnails, a small part of a full frame); an alert's JPEG snapshot whole."""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np
from PIL import Image

from bus import Alert, ClipEvent, Event
from bus.records import from_record, to_record

PREVIEW_WIDTH = 320


@dataclasses.dataclass(frozen=True)
class HostInfo:
    """Who and where a host is, as it tells the head once its model loaded. room: streams that fit on it in all."""

    host: str
    node_id: str
    hostname: str
    pid: int
    room: int
    family: str
    device: str


def to_wire(event: Event) -> dict[str, Any]:
    """The event as a picklable dict of plain values (its record) with `_preview` / `_snapshot` beside it."""
    wire = to_record(event)
    if isinstance(event, ClipEvent) and event.preview is not None:
        wire["_preview"] = shrink(event.preview, PREVIEW_WIDTH)
    elif isinstance(event, Alert) and event.snapshot is not None:
        wire["_snapshot"] = event.snapshot
    return wire


def from_wire(wire: dict[str, Any]) -> Event:
    """The event again (ValueError for what is not a record of a known type)."""
    record = {key: value for key, value in wire.items() if not key.startswith("_")}
    event = from_record(record)
    if isinstance(event, ClipEvent) and isinstance(wire.get("_preview"), np.ndarray):
        return dataclasses.replace(event, preview=wire["_preview"])
    if isinstance(event, Alert) and isinstance(wire.get("_snapshot"), bytes):
        return dataclasses.replace(event, snapshot=wire["_snapshot"])
    return event


def shrink(frame: np.ndarray, width: int) -> np.ndarray:
    """A frame ([H, W, 3] uint8 RGB) at most `width` pixels wide, its aspect kept."""
    if frame.shape[1] <= width:
        return frame
    height = max(1, round(frame.shape[0] * width / frame.shape[1]))
    return np.asarray(Image.fromarray(frame).resize((width, height), Image.Resampling.BILINEAR))
