"""Commands taken from the MQTT broker (`--mqtt-commands`): questions and watches, each answered by a result.

Topics (see `outputs.discovery`; docs/mqtt-commands.md):
- `<prefix>/<stream>/ask`: the question as plain text (Home Assistant's `text` entity publishes here);
- `<prefix>/ask`: `{"question": ..., "stream": ... (default: every stream), "id": ...}`;
  both answered on `<prefix>/ask/result` (queued or refused), the answer itself later on `<prefix>/<stream>/answer`
  carrying `request` = `mqtt-<id>`;
- `<prefix>/watches/set`: `{"action": "add" | "change" | "remove" | "list", "id": ..., ...}`, answered on
  `<prefix>/watches/result`;
- `<prefix>/recap`: the time to recap since as plain text, or `{"since", "until", "stream", "watch", "id"}`
  (`outputs.digest.recap_request`), answered on `<prefix>/recap/result`: a refusal at once, the recap once the
  sink's timeline thread read it (`recap` below; nothing is read on paho's thread).

A result is `{"action", "ok": true, "id", ...}` or `{"action", "ok": false, "id", "code", "error"}`. Pure of the
network: `MqttCommands.handle(topic, payload, retained)` returns the reply to publish (or None); the MQTT sink
calls it on paho's thread, so nothing here waits: questions are only queued, watches set through the
assistant's bounded command queue.

Hostile input is refused before it reaches the assistant: payloads over `command_max_bytes`, text that is not
UTF-8, JSON that is not an object, unknown actions or keys, ids that are not short names, retained commands
(they would run again at every connect). A flood is bounded by a token bucket (`command_rate_s`, `command_burst`):
past it a command is refused with code "rate", and past as many refusals again, dropped unanswered (counted; the
next result says how many, under "dropped").
"""

from __future__ import annotations

import json
import logging
import re
import secrets
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import outputs.discovery as topics
from bus.reporting import ErrorCallback, call_reporter
from outputs.commands import BUSY, INVALID, NOT_FOUND, CommandError, Commands
from outputs.mqtt_config import MqttConfig
from outputs.payloads import to_json
from outputs.recaps import recap_request
from timeline import TimelineConfig
from timeline.period import Period

logger = logging.getLogger(__name__)

ACTIONS = ("add", "change", "remove", "list")
ASK_KEYS = ("question", "stream", "id")
ID_PATTERN = re.compile(r"[A-Za-z0-9_.:-]{1,64}")  # matched whole (fullmatch: `$` lets a newline through)
MAX_STREAM_CHARS = 64  # a topic level longer than this is not echoed back as a stream name
RATE, TOO_LARGE, RETAINED = "rate", "too_large", "retained"
RESULT_TOPICS = {
    "watch": topics.watches_result_topic,
    "recap": topics.recap_result_topic,
    "ask_json": topics.ask_result_topic,
    "ask_text": topics.ask_result_topic,
}
ACTION_OF = {"recap": "recap", "ask_json": "ask", "ask_text": "ask"}  # a watch's action is read from its command


@dataclass(frozen=True)
class Reply:
    topic: str
    payload: bytes


# (period, stream, watch, id, notify) -> whether the recap was queued (its result is published later)
RecapQueue = Callable[[Period, str | None, str | None, str | None, bool], bool]


class TokenBucket:
    """`capacity` tokens, refilled at `rate` per second of `clock`; `take()` spends one if there is one."""

    def __init__(self, rate: float, capacity: int, clock: Callable[[], float]) -> None:
        self.rate, self.capacity, self.clock = rate, capacity, clock
        self._tokens, self._at = float(capacity), clock()

    def take(self) -> bool:
        now = self.clock()
        self._tokens = min(self.capacity, self._tokens + (now - self._at) * self.rate)
        self._at = now
        if self._tokens >= 1.0:
            self._tokens -= 1.0
            return True
        return False


class MqttCommands:
    """Turns command messages into calls on `commands` and their results into replies (see the module docstring).

    Args:
        config: the topics and the limits (`command_rate_s`, `command_burst`, `command_max_bytes`).
        commands: the running assistant (`outputs.commands.Commands`).
        on_error: told once when a flood starts dropping commands unanswered.
        clock: monotonic seconds, for the rate (tests pass their own).
        timeline: the running assistant's timeline (None: off; a recap command is refused saying so).
        recap: queues a recap read (None: no recaps, as with the timeline off).
        wall: wall seconds, for a recap's period (tests pass their own).
    """

    def __init__(
        self,
        config: MqttConfig,
        commands: Commands,
        on_error: ErrorCallback | None = None,
        clock: Callable[[], float] = time.monotonic,
        timeline: TimelineConfig | None = None,
        recap: RecapQueue | None = None,
        wall: Callable[[], float] = time.time,
    ) -> None:
        self.config = config
        self.timeline, self.recap, self.wall = timeline, recap, wall
        self.commands = commands
        self.on_error = on_error
        self._lock = threading.Lock()
        self._taken = TokenBucket(config.command_rate_s, config.command_burst, clock)
        self._refusals = TokenBucket(config.command_rate_s, config.command_burst, clock)
        self._dropped = 0  # commands dropped unanswered since the last reply
        self.dropped_total = 0

    def subscriptions(self) -> list[str]:
        """The topic filters to subscribe to."""
        return [
            topics.ask_topic(self.config, "+"),
            topics.ask_topic(self.config),
            topics.watches_topic(self.config),
            topics.recap_topic(self.config),
        ]

    def handle(self, topic: str, payload: bytes, retained: bool = False) -> Reply | None:
        """The reply to one command message, or None (not a command topic, or dropped in a flood)."""
        kind, stream = self._kind(topic)
        if kind is None:
            return None
        result_topic = RESULT_TOPICS[kind](self.config)
        with self._lock:
            if not self._taken.take():
                if not self._refusals.take():
                    self._drop()
                    return None
                refused = CommandError(
                    f"too many commands: at most {self.config.command_burst} at once and "
                    f"{self.config.command_rate_s:g} a second; try again in a moment",
                    RATE,
                )
                return self._reply(result_topic, _error(ACTION_OF.get(kind), None, refused))
        action, request_id = ACTION_OF.get(kind), None
        try:
            text = self._text(payload, retained)
            if kind == "ask_text":
                result = self._ask(text, stream, None)
            elif kind == "recap":
                body = _json_object(text) if text.lstrip().startswith("{") else {"since": text.strip()}
                request_id = _request_id(body.pop("id", None))
                self._recap(body, request_id)
                return None  # queued: the sink publishes its result once read
            else:
                body = _json_object(text)
                request_id = _request_id(body.pop("id", None))
                if kind == "ask_json":
                    result = self._ask_json(body, request_id)
                else:
                    action = _action(body)
                    result = {"action": action, "ok": True, **self.commands.watch(body)}
        except CommandError as err:
            result = _error(action, request_id, err)
        except ValueError as err:
            result = _error(action, request_id, CommandError(str(err)))
        else:
            if request_id is not None:
                result["id"] = request_id
        with self._lock:
            return self._reply(result_topic, result)

    # -- inside ---------------------------------------------------------------------------------------

    def _recap(self, body: dict[str, Any], request_id: str | None) -> None:
        """Queues the recap `body` asks for; CommandError when refused."""
        span, stream, watch, notify = recap_request(body, self.timeline, self.wall())
        if self.recap is None or not self.recap(span, stream, watch, request_id, notify):
            raise CommandError("too many recaps are being read; try again in a moment", BUSY)

    def _kind(self, topic: str) -> tuple[str | None, str | None]:
        if topic == topics.watches_topic(self.config):
            return "watch", None
        if topic == topics.recap_topic(self.config):
            return "recap", None
        if topic == topics.ask_topic(self.config):
            return "ask_json", None
        root = self.config.prefix + "/"
        levels = topic.removeprefix(root).split("/") if topic.startswith(root) else []
        if len(levels) == 2 and levels[1] == "ask":
            return "ask_text", levels[0]
        return None, None

    def _text(self, payload: bytes, retained: bool) -> str:
        if len(payload) > self.config.command_max_bytes:
            raise CommandError(
                f"the command is {len(payload)} bytes, more than the {self.config.command_max_bytes} taken; "
                "it was not read",
                TOO_LARGE,
            )
        if retained:
            raise CommandError(
                "a retained command is not run (it would run again at every connect); publish it without retain",
                RETAINED,
            )
        try:
            return payload.decode("utf-8")
        except UnicodeDecodeError:
            raise CommandError("the command is not UTF-8 text") from None

    def _ask_json(self, body: dict[str, Any], request_id: str | None) -> dict[str, Any]:
        unknown = sorted(set(body) - set(ASK_KEYS))
        if unknown:
            raise CommandError(f"unknown key(s) {', '.join(unknown)}; a question takes {', '.join(ASK_KEYS)}")
        stream = body.get("stream")
        if stream is not None and not isinstance(stream, str):
            raise CommandError("stream must be a stream's name (or left out: every stream)")
        question = body.get("question")
        if not isinstance(question, str):
            raise CommandError('a question needs "question": the text to ask')
        return self._ask(question, stream, request_id)

    def _ask(self, question: str, stream: str | None, request_id: str | None) -> dict[str, Any]:
        if stream is not None and len(stream) > MAX_STREAM_CHARS:
            raise CommandError("no such stream (the name is too long to be one)", NOT_FOUND)
        request = f"mqtt-{request_id or secrets.token_hex(6)}"
        asked = self.commands.ask(question, stream, request)
        return {"action": "ask", "ok": True, "request": request, "streams": asked}

    def _drop(self) -> None:
        """One command dropped unanswered (called with `_lock` held); the first of a flood is reported."""
        first = self._dropped == 0
        self._dropped += 1
        self.dropped_total += 1
        if first:
            call_reporter(
                self.on_error,
                f"mqtt {self.config.broker}: a flood of commands; refusals are no longer answered until it passes",
            )

    def _reply(self, topic: str, result: dict[str, Any]) -> Reply:
        """The reply (called with `_lock` held), saying how many commands went unanswered before it."""
        if self._dropped:
            result["dropped"], self._dropped = self._dropped, 0
        return Reply(topic, to_json(result))


def _json_object(text: str) -> dict[str, Any]:
    try:
        body = json.loads(text)
    except ValueError as err:
        raise CommandError(f"the command is not JSON ({err.__class__.__name__}: {str(err)[:120]})") from None
    except RecursionError:  # a few KiB of [[[[...: json's decoder recurses once a level
        raise CommandError("the command nests too deeply; a command is a flat JSON object") from None
    if not isinstance(body, dict):
        raise CommandError("the command must be a JSON object")
    return body


def _request_id(value: object) -> str | None:
    if value is None:
        return None
    if isinstance(value, int) and not isinstance(value, bool):
        value = str(value)
    if not isinstance(value, str) or not ID_PATTERN.fullmatch(value):
        raise CommandError("id must be 1 to 64 letters, digits or _ . : - (or a whole number)")
    return value


def _action(body: dict[str, Any]) -> str:
    action = body.get("action")
    if action not in ACTIONS:
        raise CommandError(f"unknown action {str(action)[:40]!r}; allowed: {', '.join(ACTIONS)}")
    return action


def _error(action: str | None, request_id: str | None, err: CommandError) -> dict[str, Any]:
    result: dict[str, Any] = {"action": action, "ok": False, "code": err.code or INVALID, "error": str(err)}
    if request_id is not None:
        result["id"] = request_id
    return result
