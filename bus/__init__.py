"""The bottom floor every room may stand on: the typed events, their records, the bus that fans them out, the
drop-oldest queue and stream-time clocks. Imports nothing of the project's other packages."""

from bus.bus import EventBus, Subscriber
from bus.drop_queue import DropOldestQueue
from bus.events import (
    DEFAULT_STREAM,
    EVENT_TYPES,
    Alert,
    AlertState,
    Answer,
    AnswerPiece,
    AnswerStart,
    CaptureChange,
    CaptureKind,
    Check,
    ClipEvent,
    End,
    ErrorEvent,
    Event,
    EventsDropped,
    Status,
    StatusKind,
    StreamState,
    WarningEvent,
)
from bus.records import RECORD_VERSION, from_record, read_log, to_json, to_record
from bus.stats import AnswerStats, ClipStats, EvidenceSpan

__all__ = [
    "DEFAULT_STREAM",
    "EVENT_TYPES",
    "RECORD_VERSION",
    "Alert",
    "AlertState",
    "Answer",
    "AnswerStats",
    "AnswerPiece",
    "AnswerStart",
    "CaptureChange",
    "CaptureKind",
    "Check",
    "ClipEvent",
    "ClipStats",
    "DropOldestQueue",
    "End",
    "ErrorEvent",
    "Event",
    "EventBus",
    "EventsDropped",
    "EvidenceSpan",
    "Status",
    "StatusKind",
    "StreamState",
    "Subscriber",
    "WarningEvent",
    "from_record",
    "read_log",
    "to_json",
    "to_record",
]
