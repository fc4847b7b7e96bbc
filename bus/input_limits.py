"""Bounds on what people hand the running assistant: how long a question may be, how many may wait for the
model, and how many are answered between two clips while clips are waiting (so video never starves)."""

from __future__ import annotations

from dataclasses import dataclass, field

from bus.refusals import AssistantBusy  # noqa: F401 (raised by the assistant, caught by the callers)

MAX_QUESTION_CHARS = 100_000  # the largest --max-question-chars accepted
MAX_PENDING = 10_000  # the largest --max-pending-questions accepted
PER_CLIP = 2  # questions answered per clip while clips wait
MAX_CHECKS_PER_CLIP = 1000  # the largest --watch-checks-per-clip accepted


@dataclass(frozen=True)
class InputLimits:
    """max_question_chars: a longer question is refused before it is queued (it would be tokenised once per
    stream). max_pending: questions waiting for the model (a question to every stream counts once); one more
    is refused as busy. per_clip: questions answered after each stream's clip while clips are waiting; with no
    clip waiting, questions are answered one after another. checks_per_clip / check_share: how many watch checks
    run after one clip of a stream, and how much of the clip's duration they may take (app/watch_checks.py).

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
    checks_per_clip: int = field(
        default=8,
        metadata={
            "flag": "--watch-checks-per-clip",
            "help": "watch checks run after each clip of a stream, at most; a due check beyond it (or beyond "
            "--watch-check-share) runs after the next clip, configured watches first, then the longest waiting "
            f"(1..{MAX_CHECKS_PER_CLIP})",
        },
    )
    check_share: float = field(
        default=0.25,
        metadata={
            "flag": "--watch-check-share",
            "help": "the share of a clip's duration that watch checks may take, for all streams together: many "
            "watches (runtime ones too) make their checks come later, never the video (0.01..1)",
        },
    )

    def __post_init__(self) -> None:
        _check_int("max_question_chars", self.max_question_chars, 1, MAX_QUESTION_CHARS)
        _check_int("max_pending", self.max_pending, 1, MAX_PENDING)
        _check_int("per_clip", self.per_clip, 1, MAX_PENDING)
        _check_int("checks_per_clip", self.checks_per_clip, 1, MAX_CHECKS_PER_CLIP)
        share = self.check_share
        if isinstance(share, bool) or not isinstance(share, (int, float)) or not 0.01 <= share <= 1.0:
            raise ValueError(f"the watch check share (--watch-check-share) must be from 0.01 to 1, got {share!r}")

    def check_budget_ms(self, clip_s: float, streams: int) -> float:
        """Milliseconds the checks after one clip of `clip_s` seconds may take, `streams` streams sharing the
        model (each stream's clip gets its part of the share)."""
        return self.check_share * max(clip_s, 0.0) * 1000.0 / max(streams, 1)

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
