"""Which parts of a clip changed: a per-region pixel comparison against the last kept version of each region.

The unit of comparison is the region one visual token covers (Qwen2-VL: 28x28 px over a temporal patch of
2 frames; SmolVLM2: one frame's token cell), on the frames exactly as the model sees them (resized).

    tracker = ChangeTracker(ChangeConfig())
    selection = tracker.select(view, layout, keyframe=tracker.keyframe_due())
    selection.keep       # [G, Rh, Rw] bool: tokens that enter the cache

How a region's change is measured (robust to what fixed cameras do):
- luma of each frame, averaged over cells (a quarter of a region's side): sensor noise and compression
  artifacts average out, a small object still fills a cell;
- the frame's global gain and offset are fitted to the reference (least squares over all cells, refitted on
  the 80% that fit best): exposure drift and a flickering light are not motion;
- a region's score is its largest cell difference after that fit (0..1 of full scale), the largest over the
  frames of its group; it changed when the score exceeds `threshold`. Changed regions grow by one region on
  every side (an object's edge that barely touches a region keeps it).
- the reference is the last KEPT version of every region, not the previous frame: slow drift accumulates
  until it crosses the threshold and the region is refreshed.
A group (temporal patch or frame) where nothing changed adds no tokens and needs no vision-tower pass; a
group where something changed keeps its changed regions and at least `floor` of its regions (the most
changed). Key frames keep everything.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

CELLS = 4  # cells per region side
TRIM = 0.8  # share of cells the gain/offset refit uses
LUMA = np.array([0.299, 0.587, 0.114], dtype=np.float32) / 255.0


@dataclass
class ChangeConfig:
    """drop_unchanged: visual tokens of unchanged regions never enter the cache (False: every clip whole,
    exactly as without this feature). threshold: how much a region must change to count (largest cell
    difference of luma, 0..1 of full scale, after the frame's gain/offset fit). keyframe_every: clips between
    full refreshes (1: every clip whole). floor: share of a changed frame's tokens kept at least (its most
    changed ones), 0..1."""

    drop_unchanged: bool = True
    threshold: float = 0.06
    keyframe_every: int = 8
    floor: float = 0.05

    def __post_init__(self) -> None:
        if not isinstance(self.drop_unchanged, bool):
            raise ValueError(f"drop_unchanged must be true or false, got {self.drop_unchanged!r}")
        if isinstance(self.threshold, bool) or not isinstance(self.threshold, int | float):
            raise ValueError(f"change threshold must be a number in (0, 1], got {self.threshold!r}")
        if not (math.isfinite(self.threshold) and 0 < self.threshold <= 1):
            raise ValueError(f"change threshold must be in (0, 1] (share of full luma scale), got {self.threshold}")
        if isinstance(self.keyframe_every, bool) or not isinstance(self.keyframe_every, int) or self.keyframe_every < 1:
            raise ValueError(
                f"keyframe_every must be an integer >= 1 (clips between key frames), got {self.keyframe_every!r}"
            )
        if isinstance(self.floor, bool) or not isinstance(self.floor, int | float):
            raise ValueError(f"change floor must be a number in [0, 1], got {self.floor!r}")
        if not (math.isfinite(self.floor) and 0 <= self.floor <= 1):
            raise ValueError(f"change floor must be in [0, 1] (share of a frame's tokens), got {self.floor}")


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
        self.reference: np.ndarray | None = None  # [Hc, Wc] cell means of the last kept version
        self.clips_since_key = 0

    def keyframe_due(self) -> bool:
        return self.reference is None or self.clips_since_key >= self.config.keyframe_every

    def select(self, view: np.ndarray, layout: ChangeLayout, keyframe: bool) -> Selection:
        """view: [F, H, W, 3] uint8, the frames as the model sees them (F a multiple of layout.group). Updates
        the reference with what is kept; counts clips towards the next key frame."""
        cells = cell_means(luma(view), layout.region)  # [F, Rh*CELLS, Rw*CELLS]
        groups = cells.shape[0] // layout.group
        rh, rw = cells.shape[1] // CELLS, cells.shape[2] // CELLS
        if self.reference is not None and self.reference.shape != cells.shape[1:]:
            self.reference = None  # the frame size changed: nothing to compare with
        keyframe = keyframe or self.reference is None
        keep = np.zeros((groups, rh, rw), dtype=bool)
        changed = np.zeros_like(keep)
        score = np.full(keep.shape, np.inf, dtype=np.float32)
        for g in range(groups):
            frames = cells[g * layout.group : (g + 1) * layout.group]
            if self.reference is not None:
                score[g] = np.max([region_scores(f, self.reference) for f in frames], axis=0)
                changed[g] = score[g] > self.config.threshold
            else:
                changed[g] = True
            keep[g] = True if keyframe else self._keep(changed[g], score[g], layout)
            self._refresh(frames[-1], keep[g])
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

    def _refresh(self, cells: np.ndarray, keep: np.ndarray) -> None:
        """Copies the kept regions' cells of the group's last frame into the reference."""
        if self.reference is None:
            self.reference = cells.copy()
            return
        mask = np.repeat(np.repeat(keep, CELLS, axis=0), CELLS, axis=1)
        self.reference[mask] = cells[mask]


def luma(view: np.ndarray) -> np.ndarray:
    """[F, H, W, 3] uint8 -> [F, H, W] float32 in 0..1."""
    return view.astype(np.float32) @ LUMA


def cell_means(y: np.ndarray, region: int) -> np.ndarray:
    """[F, H, W] -> [F, Rh*CELLS, Rw*CELLS]: means over cells (CELLS per region side; pixels beyond the
    last whole region, which the model does not see either, are ignored)."""
    f, h, w = y.shape
    rh, rw = h // region, w // region
    if rh == 0 or rw == 0:
        raise ValueError(f"frames of {w}x{h} px hold no region of {region} px")
    rows = _edges(rh * region, rh * CELLS)
    cols = _edges(rw * region, rw * CELLS)
    s = np.add.reduceat(np.add.reduceat(y[:, : rh * region, : rw * region], rows, axis=1), cols, axis=2)
    return s / np.outer(np.diff(np.append(rows, rh * region)), np.diff(np.append(cols, rw * region)))


def _edges(length: int, parts: int) -> np.ndarray:
    return np.round(np.arange(parts) * length / parts).astype(np.intp)


def region_scores(cells: np.ndarray, reference: np.ndarray) -> np.ndarray:
    """[Hc, Wc] cells of one frame vs the reference -> [Rh, Rw]: the largest cell difference per region after
    fitting the frame's gain and offset to the reference (exposure drift and flicker are not motion)."""
    residual = np.abs(cells - fit_photometric(reference, cells))
    hc, wc = residual.shape
    return residual.reshape(hc // CELLS, CELLS, wc // CELLS, CELLS).max(axis=(1, 3))


def fit_photometric(reference: np.ndarray, cells: np.ndarray) -> np.ndarray:
    """a * reference + b fitted to cells by least squares, refitted on the TRIM share of cells that fit best
    (a moving object does not bend the fit)."""
    x, y = reference.reshape(-1).astype(np.float64), cells.reshape(-1).astype(np.float64)
    a, b = _line(x, y)
    residual = np.abs(y - (a * x + b))
    inliers = residual <= np.quantile(residual, TRIM)
    if inliers.sum() >= 2:
        a, b = _line(x[inliers], y[inliers])
    return (a * reference + b).astype(np.float32)


def _line(x: np.ndarray, y: np.ndarray) -> tuple[float, float]:
    var = float(np.var(x))
    a = float(np.mean((x - x.mean()) * (y - y.mean())) / var) if var > 1e-8 else 1.0
    a = min(max(a, 0.25), 4.0)  # a gain outside this is not exposure: leave the difference to the regions
    return a, float(y.mean() - a * x.mean())


def dilate(mask: np.ndarray) -> np.ndarray:
    """[Rh, Rw] bool grown by one region on every side (8-neighbourhood)."""
    padded = np.pad(mask, 1)
    out = np.zeros_like(mask)
    for dy in range(3):
        for dx in range(3):
            out |= padded[dy : dy + mask.shape[0], dx : dx + mask.shape[1]]
    return out
