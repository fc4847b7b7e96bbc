"""A writer killed with SIGKILL in the middle of its writes leaves a timeline that opens and is sound (SQLite and
PostgreSQL)."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
from pathlib import Path

from tests.support.timeline_backends import cli_args, is_postgres, query
from timeline import TimelineConfig
from timeline.store import TimelineStore

REPO = Path(__file__).resolve().parents[2]
WRITE_FOREVER = """
import sys
import time

import numpy as np

from timeline import TimelineConfig, TimelineWriter, timeline_location
from bus import EventBus
from tests.support.event_helpers import make_event

writer = TimelineWriter(TimelineConfig(timeline_location(sys.argv[1]), check_every=16, max_bytes=1024 * 1024))
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


def test_sigkill_during_writes_leaves_a_sound_database(timeline_location):
    path = timeline_location
    (_, where), env = cli_args(path)
    child = subprocess.Popen(
        [sys.executable, "-c", WRITE_FOREVER, where], cwd=REPO, stdout=subprocess.PIPE, text=True,
        env={**os.environ, **env},
    )  # fmt: skip
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
    if is_postgres(path):
        kept = query(path, "SELECT (SELECT count(*) FROM moments) AS n, (SELECT count(*) FROM thumbnails) AS t")[0]
        assert kept["n"] > 0 and kept["t"] == kept["n"]  # every committed batch is whole
        return
    conn = sqlite3.connect(path)
    try:
        assert conn.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
        conn.execute("INSERT INTO moments_fts (moments_fts) VALUES ('integrity-check')")  # raises if unsound
        count = conn.execute("SELECT count(*) FROM moments").fetchone()[0]
        assert count > 0
        assert conn.execute("SELECT count(*) FROM thumbnails").fetchone()[0] == count
    finally:
        conn.close()
