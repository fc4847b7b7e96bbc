"""Which parts of a clip changed: a per-region pixel comparison against the last kept version of each region.

The unit of comparison is the region one visual token covers (Qwen2-VL: 28x28 px over a temporal patch of
2 frames; SmolVLM2: one frame's token cell), on the frames exactly as the model sees them (resized).

    tracker = ChangeTracker(ChangeConfig())
    selection = tracker.select(view, layout, keyframe=tracker.keyframe_due())
    selection.keep       # [G, Rh, Rw] bool: tokens that enter the cache

How a region's change is measured (robust to what fixed cameras do):
- on luma and on the two colour differences (BT.601 Cb, Cr), averaged over cells (a quarter of a region's
  side): sensor noise and compression artifacts average out, a small object still fills a cell; a light
  turning from red to green at equal luma is a change;
- the frame's tone curve is fitted to the reference on luma: a monotone map through the medians of 16 bins of
  cells sorted by brightness, applied to the reference's pixels (its luma, and each of its R, G, B channels
  for the colour differences; clipped to the pixel range) before they are averaged: exposure drift, a
  flickering light and the saturation a brighter exposure brings are not motion, and a global gain scales
  the colour differences as it scales the channels; a local change is a minority of its bin and does not bend
  the curve;
- a region's score is its largest cell difference of luma, Cb or Cr after that fit (each 0..1 of full scale),
  the largest over the frames of its group; it changed when the score exceeds `threshold`. Changed regions
  grow by one region on every side (an object's edge that barely touches a region keeps it);
- the reference is the last KEPT version of every region (its RGB pixels), not the previous frame: slow drift
  (of brightness or of colour) accumulates until it crosses the threshold and the region is refreshed.
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
LUMA = np.array([0.299, 0.587, 0.114], dtype=np.float32) / 255.0  # 8-bit RGB -> luma 0..1 (BT.601)
# 0..1 RGB -> the BT.601 colour differences Cb = 0.564 (B - Y), Cr = 0.713 (R - Y), each in -0.5..0.5
CHROMA = np.array([[-0.168736, 0.5], [-0.331264, -0.418688], [0.5, -0.081312]], dtype=np.float32)
YCC = np.concatenate([LUMA[:, None], CHROMA / 255.0], axis=1)  # [3, 3]: 8-bit RGB -> luma, Cb, Cr


@dataclass
class ChangeConfig:
    """drop_unchanged: visual tokens of unchanged regions never enter the cache (False: every clip whole,
    exactly as without this feature). threshold: how much a region must change to count (largest cell
    difference of luma or of a colour difference, Cb or Cr, 0..1 of full scale, after the frame's tone-curve
    fit). keyframe_every: clips between full refreshes (1: every clip whole). floor: share of a changed
    frame's tokens kept at least (its most changed ones), 0..1. Each field is a command-line flag and a
    --config key (app/config_flags.py)."""

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
            "help": "how much a region must change to count: largest difference of its cells' luma or colour "
            "(Cb, Cr) after the frame's exposure fit, share of full scale (0..1]",
        },
    )
    # 32 clips (2.1 minutes of 4-s clips): the interval docs/change-bench.md's sweep supports once the cache pins
    # every region's newest tokens (--pin-picture); the detector, not the key frame, catches what changes
    keyframe_every: int = field(
        default=32,
        metadata={
            "help": "clips between full refreshes (key frames), a safety net for changes the detector misses; "
            "with --no-pin-picture use 8, so that regions the policy evicted come back often"
        },
    )
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
                f"change threshold (--change-threshold) must be in (0, 1] (share of full scale), got {self.threshold}"
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
    floor and the key frame); score: [G, Rh, Rw] largest cell difference of luma, Cb or Cr per region (inf
    without a reference)."""

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
        self.reference: np.ndarray | None = None  # [H, W, 3] uint8 RGB: the last kept version of every region
        self.clips_since_key = 0

    def keyframe_due(self) -> bool:
        return self.reference is None or self.clips_since_key >= self.config.keyframe_every

    def select(self, view: np.ndarray, layout: ChangeLayout, keyframe: bool) -> Selection:
        """view: [F, H, W, 3] uint8, the frames as the model sees them (F a multiple of layout.group). Updates
        the reference with what is kept; counts clips towards the next key frame."""
        rgb = whole_regions(view, layout.region)  # [F, Rh*region, Rw*region, 3] uint8
        groups = rgb.shape[0] // layout.group
        rh, rw = rgb.shape[1] // layout.region, rgb.shape[2] // layout.region
        if self.reference is not None and self.reference.shape != rgb.shape[1:]:
            self.reference = None  # the frame size changed: nothing to compare with
        keyframe = keyframe or self.reference is None
        keep = np.zeros((groups, rh, rw), dtype=bool)
        changed = np.zeros_like(keep)
        score = np.full(keep.shape, np.inf, dtype=np.float32)
        for g in range(groups):
            frames = rgb[g * layout.group : (g + 1) * layout.group]
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


def whole_regions(view: np.ndarray, region: int) -> np.ndarray:
    """[F, H, W, 3] -> [F, Rh*region, Rw*region, 3], a view (pixels beyond the last whole region, which the
    model does not see either, left out)."""
    _, h, w, _ = view.shape
    rh, rw = h // region, w // region
    if rh == 0 or rw == 0 or region < CELLS:
        raise ValueError(f"frames of {w}x{h} px hold no region of {region} px")
    return view[:, : rh * region, : rw * region]


def cell_means(y: np.ndarray, region: int) -> np.ndarray:
    """[Rh*region, Rw*region, ...] -> [Rh*CELLS, Rw*CELLS, ...] float32 block means, CELLS cells of
    region // CELLS px per region side, aligned to each region (where region is not a multiple of CELLS, e.g.
    SmolVLM2-2.2B's 42 px, the last region % CELLS px of each region are left out); trailing axes (channels)
    kept."""
    cell = region // CELLS
    rh, rw, rest = y.shape[0] // region, y.shape[1] // region, y.shape[2:]
    hc, wc = rh * CELLS, rw * CELLS
    rows = y[: rh * region, : rw * region].reshape(rh, region, rw * region, *rest)[:, : CELLS * cell]
    rows = rows.reshape(hc, cell, rw * region, *rest).sum(axis=1, dtype=np.float32)  # [Hc, W, ...]
    cols = rows.reshape(hc, rw, region, *rest)[:, :, : CELLS * cell].reshape(hc, wc, cell, *rest).sum(axis=2)
    return cols / np.float32(cell * cell)  # summed one axis at a time: far cheaper than over both at once


class Reference:
    """The last kept picture: its luma as LEVELS steps (a tone curve is then a table lookup), its luma's cell
    means, and its RGB pixels (the same curve, as a table of the 256 channel values, maps each channel)."""

    def __init__(self, rgb: np.ndarray, region: int) -> None:
        luma = rgb.astype(np.float32) @ LUMA  # [H, W] in 0..1
        self.rgb = rgb  # [H, W, 3] uint8
        self.levels = np.rint(np.clip(luma, 0.0, 1.0) * (LEVELS - 1)).astype(np.intp)  # [H, W]
        self.cells = cell_means(luma, region)

    def mapped(self, curve) -> np.ndarray:
        """[H, W] the reference's luma through `curve`."""
        return curve(np.linspace(0.0, 1.0, LEVELS, dtype=np.float32))[self.levels]

    def mapped_rgb(self, curve) -> np.ndarray:
        """[H, W, 3] float32 the reference's channels, each through `curve` (an exposure change scales and
        clips every channel alike, so the colour differences it brings are not a change)."""
        return curve(np.arange(256, dtype=np.float32) / 255.0)[self.rgb]


def region_scores(frame: np.ndarray, reference: Reference, region: int) -> np.ndarray:
    """[H, W, 3] uint8 RGB of one frame vs the reference -> [Rh, Rw]: the largest cell difference per region,
    of luma or of either colour difference (Cb, Cr), after fitting the frame's tone curve on luma to the
    reference and mapping the reference's luma and each of its channels through it (exposure drift and flicker
    are not motion)."""
    cells = cell_means(frame, region) @ YCC  # [Hc, Wc, 3] luma, Cb, Cr (cell means first: both are linear)
    curve = tone_curve(reference.cells, cells[..., 0])
    residual = np.abs(cells[..., 0] - cell_means(reference.mapped(curve), region))
    colour = np.abs(cells[..., 1:] - cell_means(reference.mapped_rgb(curve), region) @ CHROMA).max(axis=-1)
    np.maximum(residual, colour, out=residual)
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
