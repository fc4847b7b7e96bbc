"""When a run ends by itself (--max-rounds, --duration, the end of every stream)."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class RunLimits:
    """When a run ends by itself: after `max_rounds` answers (all streams together), once every stream has
    reached `duration_s` seconds of stream time, and (when `end_with_stream`) when every stream has ended.
    0 / None = no limit."""

    max_rounds: int = field(default=0, metadata={"help": "stop after N answers (0 = no limit)"})
    duration_s: float = field(
        default=0.0,
        metadata={
            "flag": "--duration",
            "help": "stop after N seconds of stream time (0 = no limit)",
            "unit": "seconds",
        },
    )
    end_with_stream: bool = True

    def __post_init__(self) -> None:
        if self.max_rounds < 0:
            raise ValueError(f"max_rounds must be >= 0 (0 = no limit), got {self.max_rounds}")
        if self.duration_s < 0:
            raise ValueError(f"duration must be >= 0 seconds (0 = no limit), got {self.duration_s}")
