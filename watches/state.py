"""When a watch's alert begins and ends: a pure state machine over its checks (no model, no clock of its own).

Off -> on after `on_after` consecutive checks at or above the threshold, unless a cooldown after the last end
is still running (stream time); on -> off after `off_after` consecutive checks below it, which starts the
cooldown. Each begin gets an id that its end repeats.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Transition:
    """An alert that began or ended at this check. duration_s (stream seconds): at the end only."""

    id: str
    state: str  # "begin" | "end"
    p_yes: float
    stream_time: float
    duration_s: float | None = None


class WatchState:
    """One watch on one stream. `update` takes each check in stream order and says when the alert changes."""

    def __init__(self, key: str, threshold: float, on_after: int, off_after: int, cooldown: float) -> None:
        self.key = key  # "<stream>-<alert>": the ids' prefix
        self.threshold, self.on_after, self.off_after, self.cooldown = threshold, on_after, off_after, cooldown
        self.on = False
        self.run = 0  # consecutive checks on the other side of the threshold from the current state
        self.id: str | None = None
        self.began_at = 0.0
        self.cooldown_until = float("-inf")

    @property
    def settled(self) -> bool:
        """No check towards a begin or an end is pending (the last check agreed with the state)."""
        return self.run == 0

    def update(self, p_yes: float, stream_time: float, wall_time: float) -> Transition | None:
        """The check's effect: a `Transition` when the alert begins or ends, else None."""
        crossing = (p_yes < self.threshold) if self.on else (p_yes >= self.threshold)
        self.run = self.run + 1 if crossing else 0
        if not self.on and self.run >= self.on_after and stream_time >= self.cooldown_until:
            self.on, self.run, self.began_at = True, 0, stream_time
            self.id = f"{self.key}-{round(wall_time * 1000)}"
            return Transition(self.id, "begin", p_yes, stream_time)
        if self.on and self.run >= self.off_after:
            self.on, self.run = False, 0
            self.cooldown_until = stream_time + self.cooldown
            return Transition(self.id, "end", p_yes, stream_time, stream_time - self.began_at)
        return None
