"""The bottom floor every room may stand on: the typed events, their records, the bus that fans them out, the
drop-oldest queue and stream-time clocks. Imports nothing of the project's other packages."""

from bus.bus import EventBus, Subscriber
from bus.drop_queue import DropOldestQueue
from bus.events import (
    DEFAULT_STREAM,
    EVENT_TYPES,
    Alert,
    Answer,
    AnswerPiece,
    AnswerStart,
    CaptureChange,
    Check,
    ClipEvent,
    End,
    ErrorEvent,
    Event,
    Status,
    StatusKind,
    WarningEvent,
)
from bus.records import RECORD_VERSION, from_record, read_log, to_json, to_record

__all__ = [
    "DEFAULT_STREAM",
    "EVENT_TYPES",
    "RECORD_VERSION",
    "Alert",
    "Answer",
    "AnswerPiece",
    "AnswerStart",
    "CaptureChange",
    "Check",
    "ClipEvent",
    "DropOldestQueue",
    "End",
    "ErrorEvent",
    "Event",
    "EventBus",
    "Status",
    "StatusKind",
    "Subscriber",
    "WarningEvent",
    "from_record",
    "read_log",
    "to_json",
    "to_record",
]
