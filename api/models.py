"""The API's request and response bodies: dataclasses (FastAPI builds the OpenAPI schema from them). Answers
are the bus's own `Answer` events; feed events are the records of `bus.records`."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass
class Problem:
    """Every refusal under /api/v1: its HTTP status says what kind, `detail` says why and what to do (under /v1:
    OpenAI's error object, api.openai_errors.ErrorResponse)."""

    detail: str


@dataclass
class AskRequest:
    """question: asked of `stream` (None: every stream). streaming: answer as Server-Sent Events (also when the
    request accepts text/event-stream)."""

    question: str
    stream: str | None = None
    streaming: bool = False


@dataclass
class AskResult:
    """The answers (one per stream asked) and the streams whose question failed, each as the JSON record of its
    event (`answer`: question, answer, round, ttft_s, evidence, ...; `error`), exactly as the event feed and the
    --log-jsonl file carry them (`bus.records.to_record`). request: the id every event of it carries."""

    request: str
    streams: list[str]
    answers: list[dict[str, Any]] = field(default_factory=list)
    errors: list[dict[str, Any]] = field(default_factory=list)


@dataclass
class StreamView:
    name: str
    state: str  # idle | watching | reconnecting | ended; a fleet's: waiting (no host now)
    source: str | None  # redacted: never a password
    stream_time: float
    clips: int
    answers: int
    lag_s: float
    watches: list[str]
    default: bool
    host: str | None = None  # a fleet's: the host it runs on (None: one box, or waiting for a host)


@dataclass
class StreamAdd:
    """source: an rtsp(s)/http(s) URL, or a camera index configured at start (the page's source policy)."""

    name: str
    source: str


@dataclass
class Admitted:
    name: str
    admission: str  # the memory arithmetic


@dataclass
class WatchAdd:
    """A yes/no watch: the TOML's settings, plus expires_in_s (seconds from now; None: until removed) and one_shot
    (ends itself at its first alert begin). name: made when not given. streams: None watches every stream."""

    question: str
    name: str | None = None
    streams: list[str] | None = None
    every: float = 10.0
    threshold: float = 0.5
    on_after: int = 2
    off_after: int = 2
    cooldown: float = 30.0
    on_change: bool = False
    expires_in_s: float | None = None
    one_shot: bool = False


@dataclass
class WatchChange:
    """Only the settings given change. never_expires: true drops an expiry (expires_in_s sets a new one)."""

    question: str | None = None
    streams: list[str] | None = None
    every: float | None = None
    threshold: float | None = None
    on_after: int | None = None
    off_after: int | None = None
    cooldown: float | None = None
    on_change: bool | None = None
    expires_in_s: float | None = None
    never_expires: bool = False
    one_shot: bool | None = None


@dataclass
class WatchView:
    """origin: config (--alert, the TOML: listed only) or runtime (set through the API). expires_at, created:
    seconds since the epoch."""

    name: str
    question: str
    streams: list[str] | None
    every: float
    threshold: float
    on_after: int
    off_after: int
    cooldown: float
    on_change: bool
    origin: str
    owner: str | None = None
    created: float | None = None
    expires_at: float | None = None
    one_shot: bool = False


@dataclass
class FeedStatus:
    events: int
    clients: int
    dropped_clients: int
    lost_events: int
    refused_clients: int


@dataclass
class StatusView:
    streams: int
    rounds: int
    questions_waiting: int
    runtime_watches: int
    feed: FeedStatus
