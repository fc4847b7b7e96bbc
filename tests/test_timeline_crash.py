"""A writer killed with SIGKILL in the middle of its writes leaves a timeline that opens and is sound."""

from __future__ import annotations

import signal
import sqlite3
import subprocess
import sys
from pathlib import Path

from app.timeline import TimelineConfig
from app.timeline.store import TimelineStore

REPO = Path(__file__).resolve().parents[1]
WRITE_FOREVER = """
import sys
import time
from pathlib import Path

import numpy as np

from bus import EventBus
from tests.event_helpers import make_event
from app.timeline import TimelineConfig, TimelineWriter

writer = TimelineWriter(TimelineConfig(Path(sys.argv[1]), check_every=16, max_bytes=1024 * 1024))
bus = EventBus()
bus.subscribe(writer)
writer.start()
preview = np.random.default_rng(0).integers(0, 256, (120, 200, 3), np.uint8)
index, reported = 0, 0
while True:
    index += 1
    bus.publish(make_event("clip", stream="door", index=index, stream_time=4.0 * index, preview=preview))
    bus.publish(make_event("answer", stream="door", stream_time=4.0 * index, question="Is a truck there?",
                           answer="A truck parks. " * 20, auto=True, round=index))
    if writer.written > reported:
        reported = writer.written
        print(reported, flush=True)
    time.sleep(0.001)
"""


def test_sigkill_during_writes_leaves_a_sound_database(tmp_path):
    path = tmp_path / "timeline.sqlite"
    child = subprocess.Popen(
        [sys.executable, "-c", WRITE_FOREVER, str(path)], cwd=REPO, stdout=subprocess.PIPE, text=True
    )
    try:
        written = 0
        for line in child.stdout:  # wait until retention has run a few times, then kill mid-write
            written = int(line)
            if written >= 300:
                break
        assert written >= 300, "the child stopped writing"
    finally:
        child.send_signal(signal.SIGKILL)
        child.wait()
        child.stdout.close()
    assert child.returncode == -signal.SIGKILL
    store = TimelineStore(TimelineConfig(path))  # opens: quick_check passes, the WAL is recovered
    store.close()
    conn = sqlite3.connect(path)
    try:
        assert conn.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
        conn.execute("INSERT INTO moments_fts (moments_fts) VALUES ('integrity-check')")  # raises if unsound
        count = conn.execute("SELECT count(*) FROM moments").fetchone()[0]
        assert count > 0
        assert conn.execute("SELECT count(*) FROM thumbnails").fetchone()[0] == count
    finally:
        conn.close()
