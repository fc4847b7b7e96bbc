"""What the timeline costs: a thumbnail per clip, a row written per answer, and the file per stream-day.

    python scripts/bench_timeline_size.py --video out/demo.mp4                 # one stream-day
    python scripts/bench_timeline_size.py --video out/demo.mp4 --days 3 --max-mb 24   # the size bound holds

Writes `--days` days of one stream at the default rates (an answer every 30 s with its thumbnail, 4 alerts an
hour as begin and end rows) through the timeline's store, with wall times spread over those days, and reports
the write time per answer row, the bytes per stream-day, and (with --max-mb) that the file stays within its
bound while older rows go. Frames come from a real video's decoded frames.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

import av
import numpy as np
from tqdm import tqdm

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bus import Alert, Answer, AnswerStats  # noqa: E402
from timeline.config import TimelineConfig  # noqa: E402
from timeline.records import alert_row, answer_row  # noqa: E402
from timeline.store import TimelineStore  # noqa: E402
from timeline.thumbnails import thumbnail_jpeg  # noqa: E402

ANSWER = "A person in a dark jacket walks to the door, leaves a parcel on the step and goes back to a white van."


def frames_of(video: Path, count: int = 60) -> list[np.ndarray]:
    frames = []
    with av.open(str(video)) as box:
        for i, frame in enumerate(box.decode(video=0)):
            if i % 10 == 0:
                frames.append(frame.to_ndarray(format="rgb24"))
            if len(frames) >= count:
                break
    return frames


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument("--video", type=Path, default=Path("out/demo.mp4"), help="frames for the thumbnails")
    p.add_argument("--days", type=float, default=1.0, help="stream-days to write")
    p.add_argument("--max-mb", type=float, default=256.0, help="the timeline's size bound")
    args = p.parse_args(argv)
    frames = frames_of(args.video)
    started = time.perf_counter()
    thumbs = [thumbnail_jpeg(f, 160) for f in frames]
    thumb_ms = (time.perf_counter() - started) * 1000 / len(frames)
    path = Path(tempfile.mkdtemp()) / "timeline.sqlite"
    store = TimelineStore(TimelineConfig(path, days=7.0, max_bytes=int(args.max_mb * 2**20)))
    origin, answers = time.time() - args.days * 86400, int(args.days * 2880)
    times, alerts, largest = [], 0, 0
    for i in tqdm(range(answers), desc="writing", unit="answer"):
        t = 30.0 * (i + 1)
        stats = AnswerStats(round=i + 1, question="What is happening at the door?", answer=f"{ANSWER} ({i})")
        event = Answer(stream="door", stream_time=t, stats=stats, auto=True, t_wall=origin + t)
        began = time.perf_counter()
        store.write([answer_row(event, t - 30.0, thumbs[i % len(thumbs)])], now=origin + t)
        times.append((time.perf_counter() - began) * 1000)
        if i % 30 == 0:  # 4 alerts an hour
            for state in ("begin", "end"):
                alert = Alert(stream="door", id=f"door-person-{i}", alert="person", state=state,
                              p_yes=0.9, stream_time=t, question="Is a person at the door?",
                              duration_s=20.0 if state == "end" else None, t_wall=origin + t)  # fmt: skip
                store.write([alert_row(alert, thumbs[i % len(thumbs)])], now=origin + t)
                alerts += 1
        wal = path.with_name(path.name + "-wal")
        largest = max(largest, path.stat().st_size + (wal.stat().st_size if wal.exists() else 0))
    used = store.used_bytes()
    store.close()
    print(f"thumbnail of a {frames[0].shape[1]}x{frames[0].shape[0]} clip: {thumb_ms:.2f} ms")
    print(f"write per answer row with its thumbnail: median {statistics.median(times):.2f} ms, "
          f"p95 {sorted(times)[int(len(times) * 0.95)]:.2f} ms (retention runs every 64 rows)")  # fmt: skip
    print(f"{answers} answers + {alerts} alert rows: {used / 1e6:.2f} MB in use at the end, "
          f"{used / args.days / 1e6:.2f} MB per stream-day; largest file + WAL {largest / 2**20:.2f} MiB "
          f"(bound {args.max_mb:g} MiB, plus up to 4 MiB of WAL)")  # fmt: skip


if __name__ == "__main__":
    main()
