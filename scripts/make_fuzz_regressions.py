"""Write the small hostile video files kept in tests/data/fuzz/ (tests/capture/test_capture_fuzz_regressions.py).

    python scripts/make_fuzz_regressions.py --out tests/data/fuzz

Each is a tiny real file (64x48, a few frames) damaged the way a `scripts/fuzz_capture.py` case was, or
one of the representative hostile kinds (empty, truncated, huge dimensions, garbage). They are committed,
so the tests do not depend on this FFmpeg's encoders; this script documents how they were made.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run as a file from anywhere
from capture.synth import write_video  # noqa: E402
from scripts.fuzz_capture import huge_dimensions  # noqa: E402

SIZE = (64, 48)
X264 = {"preset": "ultrafast"}


def encode(name: str, codec: str, frames: int, **kwargs) -> bytes:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / name
        opts = X264 if codec == "libx264" else {}
        write_video(path, codec, SIZE, fps=4.0, duration_s=frames / 4.0, marker=False, options=opts, **kwargs)
        return path.read_bytes()


def bad_utf8_metadata() -> bytes:
    """The muxer's 'encoder' tag (Lavf...) with an invalid UTF-8 byte: PyAV raised UnicodeDecodeError at open."""
    data = encode("a.mov", "mjpeg", 4)
    assert b"Lavf" in data
    return data.replace(b"Lavf", b"\xaeavf", 1)


def no_codec() -> bytes:
    """The sample description box renamed (as a bit flip did): a video stream with no codec, hence no
    decoder (AttributeError at open)."""
    data = encode("a.mp4", "libx264", 4)
    assert b"stsd" in data
    return data.replace(b"stsd", b"st{d", 1)


def unsupported_jpeg_sampling() -> bytes:
    """Frame 2 of an MJPEG file declares 5x1 chroma sampling: FFmpeg's PatchWelcomeError mid-stream."""
    out = bytearray(encode("a.mov", "mjpeg", 4))
    sof = -1
    for _ in range(2):
        sof = out.find(b"\xff\xc0", sof + 1)
    out[sof + 14] = 0x51  # SOF0: len(2) P(1) Y(2) X(2) Nf(1), then C, HV, Tq per component: component 2's HV
    return bytes(out)


def huge_dims(name: str, codec: str) -> Callable[[], bytes]:
    def make() -> bytes:
        data = huge_dimensions(encode(name, codec, 4), np.random.default_rng(0))
        assert data is not None
        return data

    return make


def truncated(name: str, frames: int, keep: float) -> Callable[[], bytes]:
    def make() -> bytes:
        data = encode(name, "libx264", frames)
        return data[: int(len(data) * keep)]

    return make


def garbage(name: str = "", keep: int = 0) -> Callable[[], bytes]:
    """Random bytes, after the first ``keep`` bytes of a real ``name`` file (its magic and headers)."""

    def make() -> bytes:
        prefix = encode(name, "libx264", 4)[:keep] if keep else b""
        return prefix + np.random.default_rng(0).integers(0, 256, 2048, dtype=np.uint8).tobytes()

    return make


FILES: dict[str, Callable[[], bytes]] = {
    "bad-utf8-metadata.mov": bad_utf8_metadata,
    "no-codec.mp4": no_codec,
    "unsupported-jpeg-sampling.mov": unsupported_jpeg_sampling,
    "huge-dims-mjpeg.avi": huge_dims("a.avi", "mjpeg"),
    "huge-dims-mpeg4.avi": huge_dims("a.avi", "mpeg4"),
    "truncated.mp4": truncated("a.mp4", 4, 0.5),
    "truncated.mkv": truncated("a.mkv", 12, 0.6),
    "truncated-header.mkv": lambda: encode("a.mkv", "libx264", 4)[:100],  # FFmpeg: "Input/output error"
    "empty.mp4": lambda: b"",
    "garbage.webm": garbage(),
    "header-then-garbage.mkv": garbage("a.mkv", 64),
}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", type=Path, default=Path("tests/data/fuzz"), help="folder to write")
    args = p.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    for name, make in FILES.items():
        data = make()
        (args.out / name).write_bytes(data)
        print(f"{name}: {len(data)} bytes")
    return 0


if __name__ == "__main__":
    sys.exit(main())
