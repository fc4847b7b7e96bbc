"""The API's request and response bodies: dataclasses (FastAPI builds the OpenAPI schema from them). Answers
are the bus's own `Answer` events; feed events are the records of `bus.records`."""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Annotated, Any

import pydantic
from pydantic import ConfigDict, Field, StrictBool, model_validator

from bus.names import NAME_PATTERN
from watches.runtime import MAX_EVERY_S, MAX_EXPIRY_S, MIN_EVERY_S
from watches.spec import SPELLINGS, respelled


@dataclass
class Problem:
    """Every refusal under /api/v1: its HTTP status says what kind, `detail` says why and what to do (under /v1:
    OpenAI's error object, api.openai_errors.ErrorResponse)."""

    detail: str


@dataclass
class ValidationProblem:
    """One thing wrong with a request that does not fit the schema (FastAPI's own): `loc` where ("body", "query",
    "path" or "header", then the field), `msg` what, `type` a name to match on, `input` what was sent there."""

    loc: list[str | int]
    msg: str
    type: str
    input: Any = None
    ctx: dict[str, Any] | None = None


@dataclass
class Invalid:
    """A 422 under /api/v1. `detail` is a sentence for a value the assistant refused (an empty question, `every`
    under 1 s, ...), or FastAPI's list of problems for a request that does not fit the schema (malformed JSON, a
    missing field, a wrong type, an unknown key)."""

    detail: str | list[ValidationProblem]


def refusals(*codes: int) -> dict[int, dict[str, Any]]:
    """The schema's refusals of a route: `Problem` for each status, `Invalid` for 422."""
    return {code: {"model": Invalid if code == 422 else Problem} for code in codes}


BODY_UNREADABLE = {400: {"model": Problem, "description": "a body that is not JSON text (FastAPI's own refusal)"}}


Question = Annotated[str, Field(json_schema_extra={"pattern": r"\S"})]  # not blank: the assistant checks it (422)


def _bounds(**schema: float) -> Any:
    """JSON-schema bounds of a watch setting, as the watches themselves enforce them (watches.spec,
    watches.runtime: their messages, the same over MQTT); the schema documents them, it does not check them."""
    return {"json_schema_extra": schema}


def _watch_keys(cls: type, data: Any) -> Any:
    """A watch request's keys: unknown ones refused (naming the allowed ones), MQTT's spellings (`stream`: one
    name, `every_s`) taken as `streams` and `every`, as watches.spec.respelled takes them for MQTT."""
    if not isinstance(data, dict):
        return data
    allowed = [f.name for f in fields(cls)] + list(SPELLINGS)
    unknown = sorted(set(data) - set(allowed))
    if unknown:
        raise ValueError(f"unknown key(s) {', '.join(unknown)}; allowed: {', '.join(allowed)}")
    return respelled(data)


EVERY = _bounds(minimum=MIN_EVERY_S, maximum=MAX_EVERY_S)
THRESHOLD = _bounds(minimum=0.0, maximum=1.0)
CHECKS = _bounds(minimum=1)
COOLDOWN = _bounds(minimum=0.0)
EXPIRES_IN = _bounds(exclusiveMinimum=0.0, maximum=MAX_EXPIRY_S)
STREAM_NAMES = {"minItems": 1, "items": {"type": "string", "pattern": NAME_PATTERN.pattern}}  # schema only: as checked
STREAMS = "the streams it watches (null: every stream); `stream`: one name, MQTT's spelling"
EVERY_S = "seconds of stream time between checks; `every_s`: MQTT's spelling"


@dataclass
class AskRequest:
    """question: asked of `stream` (None: every stream). streaming: answer as Server-Sent Events (also when the
    request accepts text/event-stream)."""

    question: Question
    stream: str | None = None
    streaming: StrictBool = False


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


@pydantic.dataclasses.dataclass(config=ConfigDict(extra="forbid"))
class WatchAdd:
    """A yes/no watch: the TOML's settings, plus expires_in_s (seconds from now; None: until removed) and one_shot
    (ends itself at its first alert begin). name: made when not given. streams: None watches every stream.
    Unknown keys are refused (422); `stream` and `every_s` (MQTT's spellings) are `streams` and `every`."""

    question: Question
    name: str | None = None
    streams: list[str] | None = Field(None, description=STREAMS, json_schema_extra=STREAM_NAMES)
    every: float = Field(10.0, description=EVERY_S, **EVERY)
    threshold: float = Field(0.5, **THRESHOLD)
    on_after: int = Field(2, **CHECKS)
    off_after: int = Field(2, **CHECKS)
    cooldown: float = Field(30.0, **COOLDOWN)
    on_change: bool = False
    expires_in_s: float | None = Field(None, **EXPIRES_IN)
    one_shot: bool = False

    @model_validator(mode="before")
    @classmethod
    def _keys(cls, data: Any) -> Any:
        return _watch_keys(cls, data)


@pydantic.dataclasses.dataclass(config=ConfigDict(extra="forbid"))
class WatchChange:
    """Only the settings given change. never_expires: true drops an expiry (expires_in_s sets a new one). Unknown
    keys are refused (422); `stream` and `every_s` (MQTT's spellings) are `streams` and `every`."""

    question: Question | None = None
    streams: list[str] | None = Field(None, description=STREAMS, json_schema_extra=STREAM_NAMES)
    every: float | None = Field(None, description=EVERY_S, **EVERY)
    threshold: float | None = Field(None, **THRESHOLD)
    on_after: int | None = Field(None, **CHECKS)
    off_after: int | None = Field(None, **CHECKS)
    cooldown: float | None = Field(None, **COOLDOWN)
    on_change: bool | None = None
    expires_in_s: float | None = Field(None, **EXPIRES_IN)
    never_expires: bool = False
    one_shot: bool | None = None

    @model_validator(mode="before")
    @classmethod
    def _keys(cls, data: Any) -> Any:
        return _watch_keys(cls, data)


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
