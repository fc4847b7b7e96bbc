"""The API's settings (flags generated from the fields with a help text: app/config_flags.py). Kept free of
heavy imports: the CLI reads it before --help."""

from __future__ import annotations

from dataclasses import dataclass, field

from app.api.auth import ApiToken


@dataclass(frozen=True)
class ApiConfig:
    """headless: `--api`, the API served alone (no page). tokens: from --api-tokens-file or the environment."""

    headless: bool = False
    tokens: tuple[ApiToken, ...] = field(default=(), repr=False)
    watches_per_token: int = field(
        default=64, metadata={"flag": "--api-watches-per-token", "help": "runtime watches one API token may hold"}
    )
    max_watches: int = field(
        default=256, metadata={"flag": "--api-max-watches", "help": "runtime watches in all (every token together)"}
    )
    questions_per_token: int = field(
        default=4,
        metadata={"flag": "--api-questions-per-token", "help": "questions one API token may have waiting for answers"},
    )
    sse_clients: int = field(
        default=16, metadata={"flag": "--api-sse-clients", "help": "event feeds (Server-Sent Events) open at once"}
    )
    sse_queue: int = field(
        default=256,
        metadata={
            "flag": "--api-sse-queue",
            "help": "events waiting for one event-feed client; a client further behind is dropped (counted)",
        },
    )
    replay: int = field(
        default=1000,
        metadata={"flag": "--api-replay", "help": "events kept for feed clients resuming with Last-Event-ID"},
    )
    answer_timeout_s: float = field(
        default=300.0, metadata={"flag": "--api-answer-timeout", "help": "seconds an API question waits for its answer"}
    )
    max_body_kb: int = field(
        default=64, metadata={"flag": "--api-max-body-kb", "help": "largest API request body (KiB)"}
    )

    def __post_init__(self) -> None:
        for name in ("watches_per_token", "max_watches", "questions_per_token", "sse_clients", "sse_queue",
                     "replay", "max_body_kb"):  # fmt: skip
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise ValueError(f"--api-{name.replace('_', '-')} must be a whole number >= 1, got {value!r}")
        if not self.answer_timeout_s > 0:
            raise ValueError(f"--api-answer-timeout must be > 0 seconds, got {self.answer_timeout_s!r}")
