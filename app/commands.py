"""The running assistant as commands from outside see it (`outputs.commands.Commands`: MQTT's, for Home
Assistant): questions queued on the desk (bus.desk: one box's assistant or the fleet's, written once for both),
watches set on the run's runtime watches, owned by "mqtt". `app.startup.take_commands` binds them where the
outputs reach them.

Same limits as the API's: a question passes the assistant's input limits and waits with at most
`--api-questions-per-token` others of the same owner (answered or failed frees its place, or
`--api-answer-timeout`); watches count against `--api-watches-per-token` (the owner is one token) and
`--api-max-watches`. Nothing here waits on the model.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import asdict
from typing import Any

from bus import Answer, ErrorEvent, Event
from bus.desk import Desk
from bus.input_limits import AssistantBusy
from outputs.commands import BUSY, CONFLICT, INVALID, NOT_FOUND, TOO_MANY, CommandError
from watches.runtime import Conflict, NotFound, RuntimeWatch, RuntimeWatches, TooMany
from watches.spec import SPELLINGS, TABLE_KEYS, WatchSpec, respelled

OWNER = "mqtt"
ADD_KEYS = frozenset(TABLE_KEYS) | frozenset(SPELLINGS) | {"name", "expires_in_s", "one_shot", "action"}
CHANGE_KEYS = ADD_KEYS | {"never_expires"}


class RunCommands:
    """`Commands` over one run's desk and runtime watches; also a bus subscriber (it frees a question's
    place when its answers or errors arrive).

    Args:
        assistant: the run's desk (one box's `app.assistant.Assistant`, a fleet's `FleetAssistant`).
        watches: the run's `RuntimeWatches`.
        questions: questions of `owner` that may wait for answers at once.
        answer_timeout_s: a question with no answer by then no longer holds its place.
        owner: who the commands' watches belong to.
    """

    def __init__(
        self,
        assistant: Desk,
        watches: RuntimeWatches,
        questions: int = 4,
        answer_timeout_s: float = 300.0,
        owner: str = OWNER,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.assistant = assistant
        self.watches = watches
        self.questions = questions
        self.answer_timeout_s = answer_timeout_s
        self.owner = owner
        self.clock = clock
        self._lock = threading.Lock()
        self._waiting: dict[str, tuple[set[str], float]] = {}  # request -> (streams not answered yet, asked at)

    # -- questions ------------------------------------------------------------------------------------

    def ask(self, question: str, stream: str | None, request: str) -> list[str]:
        streams = self.assistant.desk_streams()
        if stream is not None and stream not in streams:
            raise CommandError(f"no stream named {stream!r}; streams: {', '.join(streams)}", NOT_FOUND)
        with self._lock:
            now = self.clock()
            self._waiting = {r: w for r, w in self._waiting.items() if now - w[1] < self.answer_timeout_s}
            if len(self._waiting) >= self.questions:
                raise CommandError(
                    f"{self.questions} questions from {self.owner} are waiting for answers, the most allowed "
                    "(--api-questions-per-token); wait for an answer first",
                    BUSY,
                )
            self._waiting[request] = (set(), now)
        try:
            asked = self.assistant.ask(question, stream, request=request)
        except AssistantBusy as err:
            self._forget(request)
            raise CommandError(str(err), BUSY) from None
        except ValueError as err:
            self._forget(request)
            raise CommandError(str(err), INVALID) from None
        with self._lock:
            if request in self._waiting:
                self._waiting[request][0].update(asked)
        return asked

    def __call__(self, event: Event) -> None:
        """Bus subscriber (the model worker's thread): an answer or error of a waiting question frees its place
        once every stream it asked is done."""
        request = getattr(event, "request", None)
        if request is None or not isinstance(event, (Answer, ErrorEvent)):
            return
        with self._lock:
            waiting = self._waiting.get(request)
            if waiting is None:
                return
            waiting[0].discard(event.stream)
            if not waiting[0]:
                del self._waiting[request]

    def _forget(self, request: str) -> None:
        with self._lock:
            self._waiting.pop(request, None)

    # -- watches --------------------------------------------------------------------------------------

    def watch(self, command: dict[str, Any]) -> dict[str, Any]:
        command = dict(command)
        action = command.pop("action", None)
        try:
            if action == "list":
                return {"watches": self._list()}
            if action == "add":
                settings = _spec_settings(command, ADD_KEYS - {"action"})
                runtime = {"expires_in_s": command.get("expires_in_s"), "one_shot": command.get("one_shot", False)}
                watch = self.watches.add(settings, owner=self.owner, **runtime)
                return {"watch": view(watch.spec, watch)}
            name = command.pop("name", None)
            if not isinstance(name, str) or not name:
                raise CommandError(f'{action} needs "name": the watch\'s name')
            self._check_owner(name)
            if action == "remove":
                if command:
                    raise CommandError(f"remove takes only name (and id); got {', '.join(sorted(command))}")
                self.watches.remove(name)
                return {"name": name}
            if action == "change":
                changes = _change_settings(command)
                watch = self.watches.change(name, changes)
                return {"watch": view(watch.spec, watch)}
            raise CommandError(f"unknown action {action!r}; allowed: add, change, remove, list")
        except CommandError:
            raise
        except (NotFound, Conflict, TooMany, AssistantBusy, ValueError) as err:
            raise CommandError(str(err), _code(err)) from None

    def _list(self) -> list[dict[str, Any]]:
        """Every watch; an owner other than these commands' is shown as "api": the result topic is read by every
        subscriber of the broker, and the API's token names are not theirs to learn."""
        configured = [view(spec) for spec in self.watches.configured.values()]
        runtime = [view(w.spec, w) for w in self.watches.list()]
        for record in runtime:
            if record["owner"] != self.owner:
                record["owner"] = "api"
        return configured + runtime

    def _check_owner(self, name: str) -> None:
        """Commands change and remove only the watches they set (the API's and the TOML's stay theirs)."""
        if name in self.watches.configured:
            raise CommandError(f"watch {name!r} is configured at start (--alert, [alerts.NAME]); not here", CONFLICT)
        owner = self.watches.get(name).owner
        if owner != self.owner:
            message = f"watch {name!r} was set through the API, not by {self.owner}; change it there"
            raise CommandError(message, CONFLICT)


def view(spec: WatchSpec, runtime: RuntimeWatch | None = None) -> dict[str, Any]:
    """A watch as JSON: its settings, origin (config | runtime) and, for a runtime one, owner, created,
    expires_at, one_shot."""
    fields = asdict(spec)
    fields["streams"] = list(spec.streams) if spec.streams is not None else None
    if runtime is None:
        return {**fields, "origin": "config"}
    return {**fields, "origin": "runtime", "owner": runtime.owner, "created": runtime.created,
            "expires_at": runtime.expires_at, "one_shot": runtime.one_shot}  # fmt: skip


def _spec_settings(command: dict[str, Any], allowed: frozenset[str]) -> dict[str, Any]:
    """WatchSpec's settings of a command: `stream` (one name) is `streams`, `every_s` is `every`."""
    unknown = sorted(set(command) - allowed)
    if unknown:
        raise CommandError(f"unknown key(s) {', '.join(unknown)}; allowed: {', '.join(sorted(allowed))}")
    return respelled({k: v for k, v in command.items() if k in TABLE_KEYS or k in SPELLINGS or k == "name"})


def _change_settings(command: dict[str, Any]) -> dict[str, Any]:
    changes = _spec_settings(command, CHANGE_KEYS - {"action", "name"})
    for key in ("expires_in_s", "one_shot"):
        if key in command:
            changes[key] = command[key]
    if command.get("never_expires") is True:
        changes["expires_in_s"] = None
    return changes


def _code(err: Exception) -> str:
    if isinstance(err, NotFound):
        return NOT_FOUND
    if isinstance(err, Conflict):
        return CONFLICT
    if isinstance(err, TooMany):
        return TOO_MANY
    if isinstance(err, AssistantBusy):
        return BUSY
    return INVALID
