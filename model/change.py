"""Which parts of a clip changed: a per-region pixel comparison against the last kept version of each region.

The unit of comparison is the region one visual token covers (Qwen2-VL: 28x28 px over a temporal patch of
2 frames; SmolVLM2: one frame's token cell), on the frames exactly as the model sees them (resized).

    tracker = ChangeTracker(ChangeConfig())
    selection = tracker.select(view, layout, keyframe=tracker.keyframe_due())
    selection.keep       # [G, Rh, Rw] bool: tokens that enter the cache

How a region's change is measured (robust to what fixed cameras do):
- on luma, averaged over cells (a quarter of a region's side): sensor noise and compression artifacts
  average out, a small object still fills a cell;
- the frame's tone curve is fitted to the reference: a monotone map through the medians of 16 bins of cells
  sorted by brightness, applied to the reference's pixels (clipped to the pixel range) before they are
  averaged: exposure drift, a flickering light and the saturation a brighter exposure brings are not motion;
  a local change is a minority of its bin and does not bend the curve;
- a region's score is its largest cell difference after that fit (0..1 of full scale), the largest over the
  frames of its group; it changed when the score exceeds `threshold`. Changed regions grow by one region on
  every side (an object's edge that barely touches a region keeps it);
- the reference is the last KEPT version of every region, not the previous frame: slow drift accumulates
  until it crosses the threshold and the region is refreshed.
A group (temporal patch or frame) where nothing changed adds no tokens and needs no vision-tower pass; a
group where something changed keeps its changed regions and at least `floor` of its regions (the most
changed). Key frames keep everything.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

CELLS = 4  # cells per region side
LEVELS = 1024  # luma steps of the reference when a tone curve is applied to it
TONE_BINS = 16  # bins of the tone curve fitted between a frame and the reference
LUMA = np.array([0.299, 0.587, 0.114], dtype=np.float32) / 255.0


@dataclass
class ChangeConfig:
    """drop_unchanged: visual tokens of unchanged regions never enter the cache (False: every clip whole,
    exactly as without this feature). threshold: how much a region must change to count (largest cell
    difference of luma, 0..1 of full scale, after the frame's tone-curve fit). keyframe_every: clips between
    full refreshes (1: every clip whole). floor: share of a changed frame's tokens kept at least (its most
    changed ones), 0..1. Each field is a command-line flag and a --config key (app/config_flags.py)."""

    drop_unchanged: bool = field(
        default=True,
        metadata={
            "help": "visual tokens of regions that did not change since the cache last saw them never enter it, "
            "kept tokens at their true positions (--no-drop-unchanged: every clip whole, as before)"
        },
    )
    threshold: float = field(
        default=0.06,
        metadata={
            "flag": "--change-threshold",
            "help": "how much a region must change to count: largest luma difference of its cells after the "
            "frame's exposure fit, share of full scale (0..1]",
        },
    )
    keyframe_every: int = field(default=8, metadata={"help": "clips between full refreshes (key frames)"})
    floor: float = field(
        default=0.05,
        metadata={
            "flag": "--change-floor",
            "help": "share of a changed frame's tokens kept at least (its most changed), 0..1",
        },
    )

    def __post_init__(self) -> None:
        if not isinstance(self.drop_unchanged, bool):
            raise ValueError(f"drop_unchanged (--drop-unchanged) must be true or false, got {self.drop_unchanged!r}")
        if isinstance(self.threshold, bool) or not isinstance(self.threshold, int | float):
            raise ValueError(
                f"change threshold (--change-threshold) must be a number in (0, 1], got {self.threshold!r}"
            )
        if not (math.isfinite(self.threshold) and 0 < self.threshold <= 1):
            raise ValueError(
                f"change threshold (--change-threshold) must be in (0, 1] (share of full luma scale), "
                f"got {self.threshold}"
            )
        if isinstance(self.keyframe_every, bool) or not isinstance(self.keyframe_every, int) or self.keyframe_every < 1:
            raise ValueError(
                "keyframe_every (--keyframe-every) must be an integer >= 1 (clips between key frames), "
                f"got {self.keyframe_every!r}"
            )
        if isinstance(self.floor, bool) or not isinstance(self.floor, int | float):
            raise ValueError(f"change floor (--change-floor) must be a number in [0, 1], got {self.floor!r}")
        if not (math.isfinite(self.floor) and 0 <= self.floor <= 1):
            raise ValueError(
                f"change floor (--change-floor) must be in [0, 1] (share of a frame's tokens), got {self.floor}"
            )


@dataclass(frozen=True)
class ChangeLayout:
    """How a clip's view maps to visual tokens. group: frames per temporal unit (2 for Qwen2-VL's temporal
    patches, 1 for SmolVLM2); region: pixels per token side; whole_groups: a group is kept whole or not at all
    (families with 1-D positions)."""

    group: int
    region: int
    whole_groups: bool = False


@dataclass
class Selection:
    """keep: [G, Rh, Rw] tokens that enter the cache; changed: [G, Rh, Rw] regions that changed (before the
    floor and the key frame); score: [G, Rh, Rw] largest cell difference per region (inf without a reference)."""

    keep: np.ndarray
    changed: np.ndarray
    score: np.ndarray
    keyframe: bool

    @property
    def kept(self) -> int:
        return int(self.keep.sum())

    @property
    def changed_tokens(self) -> int:
        return int(self.changed.sum())

    def groups_kept(self) -> np.ndarray:
        """[G] bool: groups with at least one kept token."""
        return self.keep.reshape(self.keep.shape[0], -1).any(axis=1)


class ChangeTracker:
    """The per-stream memory of what the cache last saw of every region; decides what each clip keeps."""

    def __init__(self, config: ChangeConfig) -> None:
        self.config = config
        self.reset()

    def reset(self) -> None:
        """Forgets the reference: the next clip is a key frame."""
        self.reference: np.ndarray | None = None  # [H, W] luma of the last kept version of every region
        self.clips_since_key = 0

    def keyframe_due(self) -> bool:
        return self.reference is None or self.clips_since_key >= self.config.keyframe_every

    def select(self, view: np.ndarray, layout: ChangeLayout, keyframe: bool) -> Selection:
        """view: [F, H, W, 3] uint8, the frames as the model sees them (F a multiple of layout.group). Updates
        the reference with what is kept; counts clips towards the next key frame."""
        y = luma(view, layout.region)  # [F, Rh*region, Rw*region]
        groups = y.shape[0] // layout.group
        rh, rw = y.shape[1] // layout.region, y.shape[2] // layout.region
        if self.reference is not None and self.reference.shape != y.shape[1:]:
            self.reference = None  # the frame size changed: nothing to compare with
        keyframe = keyframe or self.reference is None
        keep = np.zeros((groups, rh, rw), dtype=bool)
        changed = np.zeros_like(keep)
        score = np.full(keep.shape, np.inf, dtype=np.float32)
        for g in range(groups):
            frames = y[g * layout.group : (g + 1) * layout.group]
            if self.reference is not None:
                ref = Reference(self.reference, layout.region)
                score[g] = np.max([region_scores(f, ref, layout.region) for f in frames], axis=0)
                changed[g] = score[g] > self.config.threshold
            else:
                changed[g] = True
            keep[g] = True if keyframe else self._keep(changed[g], score[g], layout)
            self._refresh(frames[-1], keep[g], layout.region)
        self.clips_since_key = 1 if keyframe else self.clips_since_key + 1
        return Selection(keep, changed, score, keyframe)

    def _keep(self, changed: np.ndarray, score: np.ndarray, layout: ChangeLayout) -> np.ndarray:
        if not changed.any():
            return np.zeros_like(changed)
        if layout.whole_groups:
            return np.ones_like(changed)
        keep = dilate(changed)
        least = math.ceil(self.config.floor * keep.size)
        if keep.sum() < least:
            top = np.argsort(-score, axis=None, kind="stable")[:least]
            keep.flat[top] = True
        return keep

    def _refresh(self, frame: np.ndarray, keep: np.ndarray, region: int) -> None:
        """Copies the kept regions of the group's last frame into the reference."""
        if self.reference is None:
            self.reference = frame.copy()
            return
        mask = np.repeat(np.repeat(keep, region, axis=0), region, axis=1)
        self.reference[mask] = frame[mask]


def luma(view: np.ndarray, region: int) -> np.ndarray:
    """[F, H, W, 3] uint8 -> [F, Rh*region, Rw*region] float32 luma in 0..1 (pixels beyond the last whole
    region, which the model does not see either, left out)."""
    _, h, w, _ = view.shape
    rh, rw = h // region, w // region
    if rh == 0 or rw == 0 or region < CELLS:
        raise ValueError(f"frames of {w}x{h} px hold no region of {region} px")
    return view[:, : rh * region, : rw * region].astype(np.float32) @ LUMA


def cell_means(y: np.ndarray, region: int) -> np.ndarray:
    """[Rh*region, Rw*region] -> [Rh*CELLS, Rw*CELLS] block means, CELLS cells of region // CELLS px per region
    side, aligned to each region (where region is not a multiple of CELLS, e.g. SmolVLM2-2.2B's 42 px, the last
    region % CELLS px of each region are left out)."""
    cell = region // CELLS
    rh, rw = y.shape[0] // region, y.shape[1] // region
    blocks = y[: rh * region, : rw * region].reshape(rh, region, rw, region)[:, : CELLS * cell, :, : CELLS * cell]
    return blocks.reshape(rh, CELLS, cell, rw, CELLS, cell).mean(axis=(2, 5)).reshape(rh * CELLS, rw * CELLS)


class Reference:
    """The reference's luma as LEVELS steps (a tone curve is then a table lookup) and its cell means."""

    def __init__(self, luma: np.ndarray, region: int) -> None:
        self.levels = np.rint(np.clip(luma, 0.0, 1.0) * (LEVELS - 1)).astype(np.intp)  # [H, W]
        self.cells = cell_means(luma, region)

    def mapped(self, curve) -> np.ndarray:
        """[H, W] the reference's luma through `curve`."""
        return curve(np.linspace(0.0, 1.0, LEVELS, dtype=np.float32))[self.levels]


def region_scores(frame: np.ndarray, reference: Reference, region: int) -> np.ndarray:
    """[H, W] luma of one frame vs the reference -> [Rh, Rw]: the largest cell difference per region after
    fitting the frame's tone curve to the reference (exposure drift and flicker are not motion)."""
    cells = cell_means(frame, region)
    mapped = cell_means(reference.mapped(tone_curve(reference.cells, cells)), region)
    residual = np.abs(cells - mapped)
    hc, wc = residual.shape
    return residual.reshape(hc // CELLS, CELLS, wc // CELLS, CELLS).max(axis=(1, 3))


def tone_curve(reference: np.ndarray, cells: np.ndarray):
    """The frame's tone curve against the reference, from cell means: a monotone piecewise-linear map through
    the medians of TONE_BINS bins of equal cell count, continued along its end segments and clipped to the
    pixel range (a brighter exposure saturates). Returns a function of reference luma."""
    x, y = reference.reshape(-1), cells.reshape(-1)
    order = np.argsort(x, kind="stable")
    bins = [b for b in np.array_split(order, min(TONE_BINS, x.size)) if b.size]
    cx = np.array([np.median(x[b]) for b in bins])
    cy = np.maximum.accumulate(np.array([np.median(y[b]) for b in bins]))
    cx, first = np.unique(cx, return_index=True)
    cy = cy[first]
    if cx.size < 2:  # a flat reference: only an offset can be told
        offset = float(np.median(y - x))
        return lambda r: np.clip(r + offset, 0.0, 1.0)
    low, high = (cy[1] - cy[0]) / (cx[1] - cx[0]), (cy[-1] - cy[-2]) / (cx[-1] - cx[-2])
    ends_x = [min(cx[0], 0.0) - 1.0, max(cx[-1], 1.0) + 1.0]  # reference luma lies in 0..1: beyond both ends
    cx = np.concatenate([[ends_x[0]], cx, [ends_x[1]]])
    cy = np.concatenate([[cy[0] + (ends_x[0] - cx[1]) * low], cy, [cy[-1] + (ends_x[1] - cx[-2]) * high]])
    return lambda r: np.clip(np.interp(r, cx, cy), 0.0, 1.0).astype(np.float32)


def dilate(mask: np.ndarray) -> np.ndarray:
    """[Rh, Rw] bool grown by one region on every side (8-neighbourhood)."""
    padded = np.pad(mask, 1)
    out = np.zeros_like(mask)
    for dy in range(3):
        for dx in range(3):
            out |= padded[dy : dy + mask.shape[0], dx : dx + mask.shape[1]]
    return out
