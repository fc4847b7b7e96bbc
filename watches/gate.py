"""Watches checked only when their stream changed (`on_change`): a pure gate over the clips between checks.

With dropping of unchanged visual tokens (issue 30) each clip says how much of it changed. A watch with
`on_change` skips a due check (and counts it) when no clip since its last check changed: the cache then holds
nothing new about the scene, so the answer would be the last one again. A static camera costs no checks until
something moves. The first due check always runs (there is no earlier answer to stand in for it), and so does
every check while the watch's alert is between states (some checks towards on_after / off_after made, not
all): a person who walks in and stands still must still turn the alert on, and its end must still come after
they left, however still the scene is then. A failed check does not count: the next one runs.
"""

from __future__ import annotations

from dataclasses import dataclass


def clip_changed(visual_tokens_changed: int) -> bool:
    """Whether a clip brought change: any visual token whose region changed since the cache last saw it
    (bus.ClipStats.visual_tokens_changed; before the floor and key frames fill up the kept ones, so
    a key frame of a static scene did not change). With dropping off every token counts as changed: checks are
    then never skipped."""
    return visual_tokens_changed > 0


@dataclass
class ChangeGate:
    """One watch on one stream. `saw_clip` after every clip; `admit` when a check falls due."""

    on_change: bool
    changed: bool = True  # since the last check that ran (the first check always runs)
    skipped: int = 0  # checks skipped, in all

    def saw_clip(self, changed: bool) -> None:
        self.changed = self.changed or changed

    def admit(self, settled: bool = True) -> bool:
        """True: run the due check (and start collecting change again). False: skip it (counted).
        settled: the watch's alert is not between states (no check towards a begin or an end pending)."""
        if not self.on_change or self.changed or not settled:
            self.changed = False
            return True
        self.skipped += 1
        return False

    def failed(self) -> None:
        """The admitted check failed: the next due one runs."""
        self.changed = True
