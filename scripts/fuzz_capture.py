"""Hostile video files against the capture's open-and-decode path, each in a forked child with limits.

    python scripts/fuzz_capture.py --seed 0 --cases-per-mutation 20 --out-dir out/fuzz

Starts from real files encoded here in every container the capture reads (mp4, mov, mkv, webm, avi,
MPEG-TS; H.264, VP9, MJPEG, MPEG-4 Part 2, MPEG-2), and makes from each: random bit flips (anywhere, in
the first and in the last KiB, where the headers and the mp4 index live), overwritten runs, deleted and
duplicated chunks, truncations at random points, huge frame dimensions written into the container
headers (and into the MJPEG/MPEG-2 bitstream, where the size is a plain field), plus an empty file, random
bytes, and the real file's first 64 bytes followed by random bytes.

Each case runs in a child forked from this process (``RLIMIT_AS`` caps its address space, a wall-clock
limit its time) through the same calls the app makes: ``open_source`` (which decodes the first frame),
then every frame, each sampled one converted to RGB at the model's size, as the capture thread does.
A case must end in a clean end of stream or in ``SourceError`` (the capture's own error, naming the
file); anything else (another exception type, a signal, the time limit, the memory limit) is a finding,
and its input is kept in OUT_DIR/findings/. Writes OUT_DIR/cases.csv and prints the outcome counts.
"""

from __future__ import annotations

import argparse
import csv
import faulthandler
import json
import os
import resource
import select
import signal
import sys
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from tqdm import tqdm

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run as a file from anywhere
import capture.av_source  # noqa: E402, F401 (imported once here rather than in every child)
from capture import CaptureConfig, FrameSampler, SourceError, StreamClock, fit_size, open_source  # noqa: E402
from capture.synth import write_video  # noqa: E402

# (name, codec, container format or None = from the extension)
BASES = (
    ("mp4-h264.mp4", "libx264", None),
    ("mov-h264.mov", "libx264", None),
    ("mov-mjpeg.mov", "mjpeg", None),
    ("mkv-h264.mkv", "libx264", None),
    ("mkv-mjpeg.mkv", "mjpeg", None),
    ("webm-vp9.webm", "libvpx-vp9", None),
    ("avi-mjpeg.avi", "mjpeg", None),
    ("avi-mpeg4.avi", "mpeg4", None),
    ("ts-h264.ts", "libx264", "mpegts"),
    ("ts-mpeg2.ts", "mpeg2video", "mpegts"),
)
SIZE = (320, 256)  # >= 256 on both sides: Matroska stores them in 2 bytes, which the size patch relies on
MAX_SIZE = (448, 448)  # what the app resizes to for Qwen2-VL-class models
SAMPLE_FPS = 2.0


# ----- mutations: (bytes, rng) -> bytes, or None when they do not apply to this file -----


def flip_bits(data: bytes, rng: np.random.Generator, lo: int = 0, hi: int | None = None) -> bytes:
    out = bytearray(data)
    hi = len(out) if hi is None else min(hi, len(out))
    lo = max(0, min(lo, hi - 1))
    for _ in range(int(rng.integers(1, 17))):
        out[int(rng.integers(lo, hi))] ^= 1 << int(rng.integers(0, 8))
    return bytes(out)


def overwrite_runs(data: bytes, rng: np.random.Generator) -> bytes:
    out = bytearray(data)
    for _ in range(int(rng.integers(1, 5))):
        length = int(rng.integers(4, 65))
        at = int(rng.integers(0, max(1, len(out) - length)))
        out[at : at + length] = rng.integers(0, 256, length, dtype=np.uint8).tobytes()
    return bytes(out)


def delete_chunk(data: bytes, rng: np.random.Generator) -> bytes:
    length = int(rng.integers(16, 2049))
    at = int(rng.integers(0, max(1, len(data) - length)))
    return data[:at] + data[at + length :]


def duplicate_chunk(data: bytes, rng: np.random.Generator) -> bytes:
    length = int(rng.integers(16, 2049))
    src = int(rng.integers(0, max(1, len(data) - length)))
    dst = int(rng.integers(0, len(data)))
    return data[:dst] + data[src : src + length] + data[dst:]


def truncate(data: bytes, rng: np.random.Generator) -> bytes:
    return data[: int(rng.integers(1, len(data)))]


def _be(value: int, width: int) -> bytes:
    return value.to_bytes(width, "big")


def huge_dimensions(data: bytes, rng: np.random.Generator, side: int = 0xFFFF) -> bytes | None:
    """Writes ``side`` x ``side`` into every frame-size field found: mp4/mov track header and visual
    sample entry, Matroska PixelWidth/PixelHeight, AVI main and stream headers, JPEG SOF markers,
    MPEG-2 sequence headers (12 bits there: 4095). None if the file has none of them."""
    out = bytearray(data)
    patched = 0
    for box in (b"tkhd",):
        at = out.find(box)
        if at >= 4:
            end = at - 4 + int.from_bytes(out[at - 4 : at], "big")
            out[end - 8 : end] = _be(side << 16, 4) * 2  # 16.16 fixed point
            patched += 1
    for entry in (b"avc1", b"mp4v", b"jpeg", b"mjpa", b"vp09"):
        at = out.find(entry)
        if at > 0 and out[at - 4 : at] != b"\0\0\0\0":
            out[at + 28 : at + 32] = _be(side, 2) * 2
            patched += 1
    for element in (b"\xb0\x82", b"\xba\x82"):  # PixelWidth / PixelHeight, 2-byte values
        at = out.find(element)
        if at > 0 and out.startswith(b"\x1a\x45\xdf\xa3"):
            out[at + 2 : at + 4] = _be(side, 2)
            patched += 1
    if out.startswith(b"RIFF"):
        at = out.find(b"avih")
        if at > 0:
            out[at + 8 + 32 : at + 8 + 40] = (side * 2).to_bytes(4, "little") * 2
            patched += 1
        at = out.find(b"strf")
        if at > 0:
            out[at + 8 + 4 : at + 8 + 12] = (side * 2).to_bytes(4, "little") * 2
            patched += 1
    at = out.find(b"\xff\xc0")
    while at >= 0:  # JPEG SOF0: length(2) precision(1) height(2) width(2)
        out[at + 5 : at + 9] = _be(side, 2) * 2
        patched += 1
        at = out.find(b"\xff\xc0", at + 9)
    at = out.find(b"\x00\x00\x01\xb3")
    while at >= 0:  # MPEG-2 sequence header: width(12 bits) height(12 bits)
        out[at + 4 : at + 7] = b"\xff\xff\xff"
        patched += 1
        at = out.find(b"\x00\x00\x01\xb3", at + 7)
    return bytes(out) if patched else None


def large_dimensions(data: bytes, rng: np.random.Generator) -> bytes | None:
    """16384 x 16384: within FFmpeg's own size check, so a decoder may really try (the memory limit)."""
    return huge_dimensions(data, rng, side=16384)


MUTATIONS: dict[str, Callable[[bytes, np.random.Generator], bytes | None]] = {
    "flip": flip_bits,
    "flip-head": lambda d, r: flip_bits(d, r, 0, 1024),
    "flip-tail": lambda d, r: flip_bits(d, r, len(d) - 1024),
    "overwrite": overwrite_runs,
    "delete": delete_chunk,
    "duplicate": duplicate_chunk,
    "truncate": truncate,
}
ONCE: dict[str, Callable[[bytes, np.random.Generator], bytes | None]] = {
    "huge-dims": huge_dimensions,
    "large-dims": large_dimensions,
    "empty": lambda d, r: b"",
    "garbage": lambda d, r: r.integers(0, 256, 4096, dtype=np.uint8).tobytes(),
    "magic+garbage": lambda d, r: d[:64] + r.integers(0, 256, 4096, dtype=np.uint8).tobytes(),
}


# ----- one case, in a child -----


def decode_file(path: Path) -> dict:
    """What the app does with a file: open (decodes the first frame), then every frame, sampled ones
    converted to RGB at the model's size. Returns the outcome; raises whatever the capture lets through."""
    config = CaptureConfig(str(path), fps=SAMPLE_FPS, max_size=MAX_SIZE)
    try:
        source = open_source(config)
    except SourceError as err:
        return {"outcome": "error-at-open", "message": str(err)}
    clock, sampler = StreamClock(), FrameSampler(config.fps)
    decoded = sampled = 0
    try:
        for raw in source.frames():
            decoded += 1
            if sampler.offer(clock.map(raw.time)):
                rgb = raw.to_rgb(*fit_size(raw.width, raw.height, MAX_SIZE))
                assert rgb.ndim == 3 and rgb.shape[2] == 3 and rgb.dtype == np.uint8, rgb.shape
                sampled += 1
    except SourceError as err:
        return {"outcome": "error-mid-stream", "message": str(err), "frames": decoded, "sampled": sampled,
                "bad_packets": source.bad_packets}  # fmt: skip
    finally:
        source.close()
    return {"outcome": "end", "frames": decoded, "sampled": sampled, "bad_packets": source.bad_packets}


def _child(target: Callable[[Path], dict], path: Path, write_fd: int, mem_bytes: int) -> None:
    resource.setrlimit(resource.RLIMIT_AS, (mem_bytes, mem_bytes))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    faulthandler.disable()  # a crash is reported by the parent, as a signal
    try:
        result = target(path)
    except MemoryError as err:
        result = {"outcome": "memory-limit", "message": f"MemoryError: {err}"}
    except BaseException as err:  # the finding this script looks for: report its type, not die
        result = {"outcome": f"unhandled:{type(err).__module__}.{type(err).__name__}", "message": str(err)[:300]}
    try:
        os.write(write_fd, json.dumps(result).encode())
    finally:
        os._exit(0)  # never return into the parent's code


@dataclass
class CaseResult:
    outcome: str
    seconds: float
    peak_rss_mib: float
    detail: dict


def run_case(
    path: Path, time_limit_s: float, mem_bytes: int, target: Callable[[Path], dict] = decode_file
) -> CaseResult:
    """Runs ``target(path)`` (default: ``decode_file``) in a forked child; classifies how it ended."""
    read_fd, write_fd = os.pipe()
    started = time.monotonic()
    pid = os.fork()
    if pid == 0:
        os.close(read_fd)
        _child(target, path, write_fd, mem_bytes)
    os.close(write_fd)
    chunks, timed_out = [], False
    while True:
        left = time_limit_s - (time.monotonic() - started)
        if left <= 0:
            timed_out = True
            os.kill(pid, signal.SIGKILL)
            break
        ready, _, _ = select.select([read_fd], [], [], left)
        if ready:
            chunk = os.read(read_fd, 65536)
            if not chunk:
                break
            chunks.append(chunk)
    os.close(read_fd)
    _, status, usage = os.wait4(pid, 0)
    seconds = time.monotonic() - started
    peak = usage.ru_maxrss / 1024  # KiB -> MiB
    if timed_out:
        return CaseResult("hang", seconds, peak, {"message": f"no result within {time_limit_s:g} s"})
    if os.WIFSIGNALED(status):
        name = signal.Signals(os.WTERMSIG(status)).name
        return CaseResult(f"crash:{name}", seconds, peak, {"message": f"killed by {name}"})
    if not chunks:
        return CaseResult("no-result", seconds, peak, {"message": f"exit status {os.waitstatus_to_exitcode(status)}"})
    detail = json.loads(b"".join(chunks))
    return CaseResult(detail.pop("outcome"), seconds, peak, detail)


# ----- the run -----

CLEAN = ("end", "error-at-open", "error-mid-stream")


def make_bases(folder: Path) -> list[Path]:
    """Encodes the starting files in a forked child, so this process never runs encoder threads."""
    folder.mkdir(parents=True, exist_ok=True)
    paths = [folder / name for name, _, _ in BASES]
    if all(p.exists() for p in paths):
        return paths
    pid = os.fork()
    if pid == 0:
        code = 0
        try:
            for (_, codec, fmt), path in zip(BASES, paths, strict=True):
                opts = (
                    {"preset": "ultrafast"}
                    if codec == "libx264"
                    else {"deadline": "realtime"}
                    if "vpx" in codec
                    else {}
                )
                write_video(path, codec, SIZE, fps=8.0, duration_s=2.0, container_format=fmt, options=opts)
        except BaseException as err:  # report and exit non-zero: the parent says which base failed
            print(f"error: encoding the starting files failed: {err}", file=sys.stderr)
            code = 1
        os._exit(code)
    _, status = os.waitpid(pid, 0)
    if status != 0:
        raise SystemExit("error: could not encode the starting files")
    return paths


def cases(bases: list[Path], per_mutation: int, seed: int):
    """Yields (case id, base, mutation, bytes) in a fixed order from one seed."""
    rng = np.random.default_rng(seed)
    for base in bases:
        data = base.read_bytes()
        for name, mutate in ONCE.items():
            out = mutate(data, rng)
            if out is not None:
                yield f"{base.stem}.{name}", base, name, out
        for name, mutate in MUTATIONS.items():
            for i in range(per_mutation):
                yield f"{base.stem}.{name}.{i}", base, name, mutate(data, rng)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--seed", type=int, default=0, help="one seed for every mutation (default: 0)")
    p.add_argument("--cases-per-mutation", type=int, default=20, help="random cases per mutation and file")
    p.add_argument("--time-limit", type=float, default=30.0, help="seconds per case (default: 30)")
    p.add_argument("--mem-mb", type=int, default=1024, help="address space a case may add, MiB (default: 1024)")
    p.add_argument("--out-dir", type=Path, default=Path("out/fuzz"), help="starting files, findings, cases.csv")
    p.add_argument("--only", default="", help="run only cases whose id contains this text")
    args = p.parse_args(argv)
    bases = make_bases(args.out_dir / "base")
    base_as = _address_space_bytes()
    mem_bytes = base_as + args.mem_mb * 2**20
    print(f"{len(bases)} starting files in {args.out_dir / 'base'}; address space now {base_as / 2**20:.0f} MiB, "
          f"limit per case {mem_bytes / 2**20:.0f} MiB, {args.time_limit:g} s")  # fmt: skip
    todo = [c for c in cases(bases, args.cases_per_mutation, args.seed) if args.only in c[0]]
    work = args.out_dir / "work"
    findings = args.out_dir / "findings"
    work.mkdir(parents=True, exist_ok=True)
    rows, counts = [], Counter()
    with tqdm(todo, desc="fuzz cases", unit="case") as bar:
        for case_id, base, mutation, data in bar:
            path = work / f"{case_id}{base.suffix}"
            path.write_bytes(data)
            r = run_case(path, args.time_limit, mem_bytes)
            counts[r.outcome] += 1
            if r.outcome not in CLEAN:
                findings.mkdir(parents=True, exist_ok=True)
                (findings / path.name).write_bytes(data)
                tqdm.write(f"FINDING {case_id}: {r.outcome}: {r.detail.get('message', '')[:200]}")
            path.unlink()
            bar.set_postfix_str(" ".join(f"{k}={v}" for k, v in sorted(counts.items())))
            rows.append([case_id, base.suffix.lstrip("."), base.stem.split("-", 1)[1], mutation, len(data), r.outcome,
                         f"{r.seconds:.3f}", f"{r.peak_rss_mib:.0f}", r.detail.get("frames", ""),
                         r.detail.get("bad_packets", ""), r.detail.get("message", "")[:300]])  # fmt: skip
    out_csv = args.out_dir / "cases.csv"
    with out_csv.open("w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["case", "container", "codec", "mutation", "bytes", "outcome", "seconds", "peak_rss_mib",
                    "frames", "bad_packets", "message"])  # fmt: skip
        w.writerows(rows)
    print(f"\n{len(rows)} cases (seed {args.seed}); wrote {out_csv}")
    print("| outcome | cases |\n| --- | ---: |")
    for outcome, n in counts.most_common():
        print(f"| {outcome} | {n} |")
    bad = sum(n for k, n in counts.items() if k not in CLEAN)
    print(f"{bad} finding(s)" + (f"; inputs kept in {findings}" if bad else ""))
    return 1 if bad else 0


def _address_space_bytes() -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmSize:"):
                return int(line.split()[1]) * 1024
    raise RuntimeError("no VmSize in /proc/self/status")


if __name__ == "__main__":
    sys.exit(main())
