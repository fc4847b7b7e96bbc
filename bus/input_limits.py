"""Bounds on what people hand the running assistant: how long a question may be, how many may wait for the
model, and how many are answered between two clips while clips are waiting (so video never starves)."""

from __future__ import annotations

from dataclasses import dataclass, field

from bus.refusals import AssistantBusy  # noqa: F401 (raised by the assistant, caught by the callers)

MAX_QUESTION_CHARS = 100_000  # the largest --max-question-chars accepted
MAX_PENDING = 10_000  # the largest --max-pending-questions accepted
PER_CLIP = 2  # questions answered per clip while clips wait


@dataclass(frozen=True)
class InputLimits:
    """max_question_chars: a longer question is refused before it is queued (it would be tokenised once per
    stream). max_pending: questions waiting for the model (a question to every stream counts once); one more
    is refused as busy. per_clip: questions answered after each stream's clip while clips are waiting; with no
    clip waiting, questions are answered one after another.

    A field with `metadata={"help": ...}` is a command-line flag and a --config key (app/config_flags.py)."""

    max_question_chars: int = field(
        default=2000,
        metadata={
            "help": "a longer question (typed or from the page) is refused before it is queued "
            f"(1..{MAX_QUESTION_CHARS})"
        },
    )
    max_pending: int = field(
        default=16,
        metadata={
            "flag": "--max-pending-questions",
            "help": "questions waiting for the model; one more is refused as busy (try again). While clips wait, at "
            f"most {PER_CLIP} questions are answered per clip, so questions never starve the video (1..{MAX_PENDING})",
        },
    )
    per_clip: int = PER_CLIP

    def __post_init__(self) -> None:
        _check_int("max_question_chars", self.max_question_chars, 1, MAX_QUESTION_CHARS)
        _check_int("max_pending", self.max_pending, 1, MAX_PENDING)
        _check_int("per_clip", self.per_clip, 1, MAX_PENDING)

    def check(self, question: str) -> str:
        """The question without surrounding blanks; ValueError saying why when it is empty or too long."""
        if not isinstance(question, str) or not question.strip():
            raise ValueError("the question is empty: type a question about the stream")
        text = question.strip()
        if len(text) > self.max_question_chars:
            raise ValueError(too_long(len(text), self.max_question_chars))
        return text

    def busy(self) -> AssistantBusy:
        return AssistantBusy(
            f"busy: {self.max_pending} questions are already waiting for the model "
            "(--max-pending-questions); this one was not queued, try again in a moment"
        )


def too_long(chars: int, limit: int) -> str:
    return (
        f"the question is too long ({chars} characters; at most {limit}, --max-question-chars): "
        "it was not queued, ask a shorter one"
    )


def _check_int(name: str, value: int, low: int, high: int) -> None:
    if not isinstance(value, int) or isinstance(value, bool) or not low <= value <= high:
        raise ValueError(f"{name} must be a whole number from {low} to {high}, got {value!r}")
