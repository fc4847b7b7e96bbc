"""The standing question, posted every `every_s` seconds of stream time. Pure logic, no threads."""

from __future__ import annotations

import math
import threading
from dataclasses import dataclass, field

DEFAULT_QUESTION = "What is happening now?"


@dataclass
class StandingQuestion:
    """Asks `question` each time the stream passes a multiple of `every_s` (0 disables it).

    Editable while running (the web page does): `update()` is thread-safe.
    """

    question: str = field(default=DEFAULT_QUESTION, metadata={"help": "the standing question"})
    every_s: float = field(
        default=30.0,
        metadata={"flag": "--every", "help": "ask it every N seconds of stream time (0 = never)", "unit": "seconds"},
    )
    next_due_s: float = field(init=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, init=False, repr=False)

    def __post_init__(self) -> None:
        self._validate(self.question, self.every_s)
        self.next_due_s = self.every_s

    @staticmethod
    def _validate(question: str, every_s: float) -> None:
        if not math.isfinite(every_s) or every_s < 0:
            raise ValueError(f"every must be >= 0 seconds of stream time (0 = never), got {every_s}")
        if every_s > 0 and not question.strip():
            raise ValueError("the standing question must not be empty")

    def __getstate__(self) -> dict:
        """Picklable (the fleet sends a stream's settings to its host): the lock stays behind, a new one is made."""
        return {key: value for key, value in self.__dict__.items() if key != "_lock"}

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state)
        self._lock = threading.Lock()

    def update(self, question: str | None = None, every_s: float | None = None, now_s: float = 0.0) -> None:
        """Changes the question and/or interval; the next question is due one interval after `now_s`."""
        with self._lock:
            new_question = self.question if question is None else question.strip()
            new_every = self.every_s if every_s is None else float(every_s)
            self._validate(new_question, new_every)
            self.question, self.every_s = new_question, new_every
            self.next_due_s = now_s + new_every

    def due(self, stream_time_s: float) -> str | None:
        """The question if one is due at this stream time (then schedules the next), else None.

        Missed slots are not replayed: after a long gap one question is asked, and the next is due at
        the following multiple of the interval.
        """
        with self._lock:
            if self.every_s <= 0 or stream_time_s + 1e-6 < self.next_due_s:
                return None
            slots_passed = math.floor((stream_time_s + 1e-6) / self.every_s)
            self.next_due_s = (slots_passed + 1) * self.every_s
            return self.question

    def reset(self) -> None:
        with self._lock:
            self.next_due_s = self.every_s
