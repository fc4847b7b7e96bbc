"""Small JPEG thumbnails, and the recent clip previews of each stream to take an answer's thumbnail from."""

from __future__ import annotations

import collections
import io

import numpy as np
from PIL import Image

THUMBNAIL_QUALITY = 70


def thumbnail_jpeg(image: np.ndarray | bytes, width: int) -> bytes:
    """A JPEG at most `width` pixels wide of a frame ([H, W, 3] uint8 RGB) or of JPEG bytes (alert snapshots)."""
    picture = Image.open(io.BytesIO(image)) if isinstance(image, bytes) else Image.fromarray(image)
    picture = picture.convert("RGB")
    if picture.width > width:
        height = max(1, round(picture.height * width / picture.width))
        picture.draft("RGB", (width, height))  # JPEG input: decode at a reduced scale when it can
        picture = picture.resize((width, height), Image.Resampling.BILINEAR)
    out = io.BytesIO()
    picture.save(out, format="JPEG", quality=THUMBNAIL_QUALITY)
    return out.getvalue()


class PreviewRings:
    """The last `per_stream` thumbnails of each stream, by the stream time of their clip's end (seconds)."""

    def __init__(self, per_stream: int) -> None:
        self.per_stream = per_stream
        self._rings: dict[str, collections.deque[tuple[float, bytes]]] = {}

    def add(self, stream: str, stream_time: float, jpeg: bytes) -> None:
        ring = self._rings.setdefault(stream, collections.deque(maxlen=self.per_stream))
        ring.append((stream_time, jpeg))

    def nearest(self, stream: str, stream_time: float) -> bytes | None:
        """The thumbnail whose clip ended nearest `stream_time`, or None if the stream has none."""
        ring = self._rings.get(stream)
        if not ring:
            return None
        return min(ring, key=lambda item: abs(item[0] - stream_time))[1]

    def forget(self, stream: str) -> None:
        self._rings.pop(stream, None)
