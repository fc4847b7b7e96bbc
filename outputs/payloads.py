"""The JSON bodies that leave the box, built from bus events' records (`bus.records.to_record`, the one place
an event becomes JSON). MQTT and webhooks send the same fields. A fleet's spooled alert or answer adds its durable
key (`event_key`, `bus.receipt`): the same in every run that sends it, so a receiver can drop a repeat."""

from __future__ import annotations

import base64
import json
from typing import Any

from bus import Alert, Answer, Event, to_record
from bus.receipt import key_of

ANSWER_FIELDS = ("stream", "round", "stream_time", "question", "answer", "auto", "t_wall")
ALERT_FIELDS = ("stream", "id", "alert", "state", "p_yes", "stream_time", "duration_s", "t_wall")


def answer_payload(event: Answer) -> dict[str, Any]:
    """{"type": "answer", stream, round, stream_time, question, answer, auto, t_wall} of an answer event, plus
    `request` when a request asked it (the API's, or an MQTT command's `mqtt-<id>`), `event_key` when it has one."""
    record = to_record(event)
    payload = {"type": "answer", **{key: record[key] for key in ANSWER_FIELDS}}
    if event.request:
        payload["request"] = event.request
    return _keyed(payload, event)


def alert_payload(event: Alert, with_snapshot: bool = False) -> dict[str, Any]:
    """{"type": "alert", stream, id, alert, state, p_yes, stream_time, t_wall} of an alert event, plus
    duration_s when the event has it (end), reason when an end has one, plus the JPEG as base64 under
    `snapshot_jpeg_base64` when `with_snapshot` and the event carries one (begin)."""
    record = to_record(event)
    payload = {"type": "alert", **{key: record[key] for key in ALERT_FIELDS if record.get(key) is not None}}
    if event.reason:  # an end that its watch did not decide (the fleet: its host was lost)
        payload["reason"] = event.reason
    snapshot = event.snapshot
    if with_snapshot and isinstance(snapshot, (bytes, bytearray)):
        payload["snapshot_jpeg_base64"] = base64.b64encode(snapshot).decode("ascii")
    return _keyed(payload, event)


def _keyed(payload: dict[str, Any], event: Event) -> dict[str, Any]:
    key = key_of(event)
    if key is not None:
        payload["event_key"] = key
    return payload


def _plain(value: Any) -> Any:
    """A numpy or torch scalar as its Python number; anything else JSON does not know as its string."""
    item = getattr(value, "item", None)
    return item() if callable(item) else str(value)


def to_json(payload: dict[str, Any]) -> bytes:
    """Compact UTF-8 JSON of `payload`."""
    return json.dumps(payload, ensure_ascii=False, separators=(",", ":"), default=_plain).encode("utf-8")
