"""A recap of the timeline as the outputs carry it: the `Digest` event (the scheduled digest, `outputs.digest`), and
the MQTT recap command's request and result (`<prefix>/recap`, `outputs.mqtt_commands`; docs/mqtt-commands.md).
Both need the timeline; with it off the command is refused saying what to turn on (`TIMELINE_OFF`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

from bus import Event
from outputs.commands import CommandError
from timeline import TimelineConfig
from timeline.period import Period, PeriodError, parse_time, period
from timeline.recap import Recap, recap_text

RECAP_KEYS = ("since", "until", "stream", "watch", "notify", "id")
MAX_NAME_CHARS = 64
TIMELINE_OFF = (
    "the recap reads the timeline, which is off in this run: start it with --timeline PATH (not --timeline '')"
)
NOT_AVAILABLE = "not_available"


@dataclass(frozen=True, kw_only=True)
class Digest(Event):
    """A recap for the outputs (not written to the event log: the timeline holds what it tells). `text`: its
    `recap_text`; `scheduled`: from --digest-at (False: asked for by an MQTT command, which has its own reply)."""

    TYPE: ClassVar[str] = "digest"
    LOGGED: ClassVar[bool] = False
    recap: Recap
    text: str
    scheduled: bool = True

    def payload(self) -> dict[str, Any]:
        """The JSON webhooks POST and MQTT publishes: {"type": "digest", "text", "scheduled", **the recap}."""
        return {"type": "digest", "text": self.text, "scheduled": self.scheduled, **self.recap.to_dict()}


def recap_request(
    body: dict[str, Any], timeline: TimelineConfig | None, now: float
) -> tuple[Period, str | None, str | None, bool]:
    """(period, stream, watch, notify) of a recap command's object of `RECAP_KEYS` but `id` (`since` default a day
    ago, `until` default now, `notify` default true: the recap goes to the other outputs too, as a digest; the plain
    text command is {"since": text}). CommandError saying why when refused (the period's PeriodError message; with
    the timeline off, what to turn on)."""
    if unknown := sorted(set(body) - set(RECAP_KEYS)):
        raise CommandError(f"unknown key(s) {', '.join(unknown)[:120]}; a recap takes {', '.join(RECAP_KEYS)}")
    names = [body.get("stream"), body.get("watch")]
    if any(name is not None and (not isinstance(name, str) or len(name) > MAX_NAME_CHARS) for name in names):
        raise CommandError(f"stream and watch must be names of at most {MAX_NAME_CHARS} characters (or left out)")
    notify = body.get("notify", True)
    if not isinstance(notify, bool):
        raise CommandError("notify must be true or false (false: the reply only, no digest to ntfy and webhooks)")
    if timeline is None:
        raise CommandError(TIMELINE_OFF, NOT_AVAILABLE)
    try:
        since, until = (_time(body.get(key), now) for key in ("since", "until"))
        span = period(since, until, keep_days=timeline.days, now=now)
    except PeriodError as err:
        raise CommandError(str(err)) from None
    return span, names[0], names[1], notify


def recap_reply(recap: Recap, request_id: str | None) -> dict[str, Any]:
    """The result of a recap command: {"action": "recap", "ok": true, "id", "text", "recap"}."""
    result: dict[str, Any] = {"action": "recap", "ok": True, "text": recap_text(recap), "recap": recap.to_dict()}
    if request_id is not None:
        result["id"] = request_id
    return result


def _time(value: object, now: float) -> float | None:
    if value is None or value == "":
        return None
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    if not isinstance(value, str):
        raise PeriodError("since and until must be times: text (an age, an ISO 8601 time) or seconds since the epoch")
    return parse_time(value, now=now)
