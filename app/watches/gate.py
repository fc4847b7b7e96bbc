"""Watches checked only when their stream changed (`on_change`): a pure gate over the clips between checks.

With dropping of unchanged visual tokens (issue 30) each clip says how much of it changed. A watch with
`on_change` skips a due check (and counts it) when no clip since its last check changed: the cache then holds
nothing new about the scene, so the answer would be the last one again. A static camera costs no checks until
something moves. The first due check always runs (there is no earlier answer to stand in for it).
"""

from __future__ import annotations

from dataclasses import dataclass


def clip_changed(visual_tokens_kept: int | None, keyframe: bool = False, changed_tokens: int | None = None) -> bool:
    """Whether a clip brought change, from its metrics.

    changed_tokens: the tokens whose regions changed (before the floor and key frames fill up the kept ones);
    when known it decides. Otherwise: a clip that kept nothing did not change; one kept whole as a key frame, or
    with dropping off (`visual_tokens_kept` None), may have, so it counts as changed (a check is never skipped
    on a guess).
    """
    if changed_tokens is not None:
        return changed_tokens > 0
    if visual_tokens_kept is None or keyframe:
        return True
    return visual_tokens_kept > 0


@dataclass
class ChangeGate:
    """One watch on one stream. `saw_clip` after every clip; `admit` when a check falls due."""

    on_change: bool
    changed: bool = True  # since the last check that ran (the first check always runs)
    skipped: int = 0  # checks skipped, in all

    def saw_clip(self, changed: bool) -> None:
        self.changed = self.changed or changed

    def admit(self) -> bool:
        """True: run the due check (and start collecting change again). False: skip it (counted)."""
        if not self.on_change or self.changed:
            self.changed = False
            return True
        self.skipped += 1
        return False
