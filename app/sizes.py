"""The sizes and counts the command line accepts, checked before anything loads: a value outside its range (or
not finite) is refused with the range, instead of failing after a model load or filling the memory."""

from __future__ import annotations

import argparse
import math
from dataclasses import dataclass

YEAR_S = 365 * 24 * 3600


@dataclass(frozen=True)
class Range:
    flag: str
    low: float
    high: float
    unit: str

    def check(self, value: float) -> None:
        if not (isinstance(value, (int, float)) and math.isfinite(value) and self.low <= value <= self.high):
            unit = f" {self.unit}" if self.unit else ""
            allowed = f"from {_number(self.low)} to {_number(self.high)}{unit}"
            raise ValueError(f"{self.flag} must be {allowed}, got {value!r}")


def _number(value: float) -> str:
    return f"{int(value):,}" if value == int(value) else f"{value:g}"


# dest -> its range; the component configs check what depends on other values (budget > window, fps * clip_seconds).
RANGES = {
    "budget": Range("--budget", 2, 2**20, "tokens"),
    "window": Range("--window", 1, 2**16, "tokens"),
    "recall": Range("--recall", 0, 2**20, "tokens"),
    "block": Range("--block", 1, 2**16, "tokens"),
    "pool": Range("--pool", 1, 2**12, "tokens"),
    "sinks": Range("--sinks", 0, 2**16, "tokens"),
    "bias": Range("--bias", 0, 1e6, ""),
    "store_mb": Range("--store-mb", 0, 2**20, "MiB (0 = automatic)"),
    "max_new_tokens": Range("--max-new-tokens", 1, 2**15, "tokens"),
    "chunk_size": Range("--chunk-size", 1, 2**16, "tokens"),
    "fps": Range("--fps", 0.001, 240, "frames per second"),
    "clip_seconds": Range("--clip-seconds", 0.01, 600, "seconds"),
    "every": Range("--every", 0, YEAR_S, "seconds (0 = never)"),
    "duration": Range("--duration", 0, 100 * YEAR_S, "seconds (0 = no limit)"),
    "max_rounds": Range("--max-rounds", 0, 2**40, "answers (0 = no limit)"),
    "timeline_days": Range("--timeline-days", 0.001, 36_500, "days"),
    "timeline_mb": Range("--timeline-mb", 1, 2**20, "MiB"),
    "max_upload_mb": Range("--max-upload-mb", 1, 2**20, "MiB"),
    "max_uploads": Range("--max-uploads", 1, 100_000, "files"),
    "max_upload_total_mb": Range("--max-upload-total-mb", 1, 2**20, "MiB"),
}
MAX_FRAMES_PER_CLIP = 1024  # fps * clip_seconds: a clip's frames are held in memory together


def check_sizes(args: argparse.Namespace) -> None:
    """Raises ValueError naming the first flag outside its range, with the range."""
    for dest, allowed in RANGES.items():
        value = getattr(args, dest, None)
        if value is not None:
            allowed.check(value)
    frames = args.fps * args.clip_seconds
    if frames > MAX_FRAMES_PER_CLIP:
        raise ValueError(
            f"--fps x --clip-seconds must be at most {MAX_FRAMES_PER_CLIP} frames per clip (the clip is held in "
            f"memory whole), got {args.fps:g} x {args.clip_seconds:g} = {frames:g}"
        )
