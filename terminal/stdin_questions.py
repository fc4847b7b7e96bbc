"""Reads questions typed on stdin (one per line) and hands them to the assistant, on a joinable thread; a line
`+NAME=SOURCE` adds a stream instead, a line `-NAME` removes one, and `watch for: ...`, `watches`, `unwatch NAME`
set, list and end watches (terminal.watch_commands). A line is never held whole beyond the question
length limit, and a refused question (too long, busy) is said, never raised: the reader goes on."""

from __future__ import annotations

import logging
import select
import sys
import threading
from collections.abc import Callable
from typing import TextIO

from bus.input_limits import too_long

logger = logging.getLogger(__name__)

_NAME_ROOM = 256  # characters a line may hold beyond the question: `NAME: ` in front of it
_DRAIN = 65536  # characters read at a time while the rest of a too long line is skipped


def route(line: str, stream_names: list[str]) -> tuple[str, str | None]:
    """`door: is the gate open?` -> ("is the gate open?", "door") when door is a stream; otherwise the whole
    line goes to every stream (None)."""
    name, sep, rest = line.partition(":")
    if sep and name.strip() in stream_names and rest.strip():
        return rest.strip(), name.strip()
    return line.strip(), None


class StdinQuestions:
    """Polls `stream` with select() so that `stop()` is honoured within `poll_s` seconds. With several streams,
        a line `NAME: question` asks that stream only; any other line asks every stream. With `add`, a line
        `+NAME=SOURCE` is passed to it (without the +); it returns the added stream's name (None: refused), which
        lines may then name. A line longer than `max_chars` (plus room for a name) is skipped unread and refused; `ask`
        refusing a question (ValueError: too long, busy, unknown stream) is handed to `say`, as is a refused line. With
        `remove`, a line `-NAME` is passed to it (without the -); it returns whether the stream was removed. With
    `watches`, every other line is offered to it first, with its stream (`NAME: ...`, as for a question); it returns
    whether the line was a watch command (`terminal.watch_commands.TerminalWatches`), else the line is a question."""

    def __init__(
        self,
        ask: Callable[..., None],
        stream: TextIO | None = None,
        poll_s: float = 0.2,
        stream_names: list[str] | None = None,
        add: Callable[[str], str | None] | None = None,
        remove: Callable[[str], bool] | None = None,
        max_chars: int = 2000,
        say: Callable[[str], None] | None = None,
        watches: Callable[[str, str | None], bool] | None = None,
    ) -> None:
        self._ask = ask
        self._watches = watches
        self._add = add
        self._remove = remove
        self._max_line = max_chars + _NAME_ROOM
        self._max_chars = max_chars
        self._say = say or logger.warning
        self._names = list(stream_names or [])
        self._stream = sys.stdin if stream is None else stream  # read at start: a caller may have replaced it
        self._poll_s = poll_s
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="stdin-questions", daemon=True)

    def start(self) -> None:
        if self._stream is None or self._stream.closed:
            return
        self._thread.start()

    def stop(self, timeout: float = 2.0) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout)

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                ready, _, _ = select.select([self._stream], [], [], self._poll_s)
            except (OSError, ValueError):  # stdin closed or not selectable
                return
            if not ready:
                continue
            line = self._stream.readline(self._max_line + 1)
            if line == "":  # end of input: no more questions, the stream goes on
                return
            if len(line) > self._max_line and not line.endswith("\n"):
                self._say(f"question refused: {too_long(len(line) + self._skip_rest(), self._max_chars)}")
                continue
            if self._add is not None and line.strip().startswith("+"):
                name = self._add(line.strip()[1:])
                if name is not None:
                    self._names.append(name)
            elif self._remove is not None and line.strip().startswith("-"):
                name = line.strip()[1:].strip()
                if self._remove(name) and name in self._names:
                    self._names.remove(name)
            elif line.strip():
                question, target = route(line, self._names)
                if self._watches is not None and self._watches(question, target):
                    continue
                try:
                    self._ask(question, stream=target)
                except ValueError as err:
                    self._say(f"question refused: {err}")

    def _skip_rest(self) -> int:
        """Reads and drops the rest of the current line; returns how many characters that was."""
        skipped = 0
        while True:
            chunk = self._stream.readline(_DRAIN)
            skipped += len(chunk.rstrip("\n"))
            if chunk == "" or chunk.endswith("\n"):
                return skipped
