"""What an output that takes commands (MQTT's, for Home Assistant) may ask of the running assistant: a small
interface, so that outputs/ never imports app/. `app/commands.py` implements it over the assistant and the run's
runtime watches; `app/startup.py` binds it into a `CommandsSlot` once they exist.

Every method returns at once: a question is only queued (its answer arrives later as events on the bus), a watch
is set through the assistant's bounded command queue. A refusal is a `CommandError` with a short `code` a client
can match on and a message a person can read.
"""

from __future__ import annotations

import threading
from typing import Any, Protocol

# the codes of refusals (a client matches on them; the message says the rest)
INVALID, NOT_FOUND, CONFLICT, TOO_MANY = "invalid", "not_found", "conflict", "too_many"
BUSY, NOT_READY = "busy", "not_ready"


class CommandError(ValueError):
    """A command refused, changing nothing. code: one of the module's codes (or the output's own, e.g. "rate")."""

    def __init__(self, message: str, code: str = INVALID) -> None:
        super().__init__(message)
        self.code = code


class Commands(Protocol):
    """The running assistant as commands see it."""

    def ask(self, question: str, stream: str | None, request: str) -> list[str]:
        """Queues `question` for `stream` (None: every stream); its answer events carry `request`. Returns the
        streams asked. CommandError when it is empty, too long, the stream unknown, or the assistant busy."""
        ...

    def watch(self, command: dict[str, Any]) -> dict[str, Any]:
        """Runs one watch command ({"action": "add" | "change" | "remove" | "list", ...}) and returns its result
        (JSON-ready, without "ok"/"id": the caller adds them). CommandError when refused."""
        ...


class CommandsSlot:
    """A `Commands` that forwards to the one bound later: the outputs start before the assistant and its watches
    exist. Until `bind` (and after `unbind`) every command is refused as not ready."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._target: Commands | None = None

    def bind(self, target: Commands | None) -> None:
        with self._lock:
            self._target = target

    def unbind(self) -> None:
        self.bind(None)

    def _bound(self) -> Commands:
        with self._lock:
            target = self._target
        if target is None:
            raise CommandError("the assistant is not ready for commands (starting or stopping); try again", NOT_READY)
        return target

    def ask(self, question: str, stream: str | None, request: str) -> list[str]:
        return self._bound().ask(question, stream, request)

    def watch(self, command: dict[str, Any]) -> dict[str, Any]:
        return self._bound().watch(command)
