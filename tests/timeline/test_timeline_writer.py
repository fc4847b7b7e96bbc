"""The timeline's file and writer: schema, WAL, privacy, what each event becomes, retention, faults. The tests
that take `timeline_location` run against SQLite and PostgreSQL; the others are about the SQLite file."""

from __future__ import annotations

import dataclasses
import io
import os
import sqlite3
import stat
import time
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from bus import ClipEvent, EventBus
from tests.support.event_helpers import make_event
from tests.support.timeline_backends import count, is_postgres, query
from timeline import TimelineConfig, TimelineError, TimelineWriter
from timeline.store import Row, TimelineStore


def frame(value: int = 90, width: int = 640, height: int = 360) -> np.ndarray:
    """[H, W, 3] uint8 RGB with a little structure."""
    image = np.full((height, width, 3), value, np.uint8)
    image[: height // 2, : width // 3] = (200, 40, 40)
    return image


def jpeg(image: np.ndarray) -> bytes:
    out = io.BytesIO()
    Image.fromarray(image).save(out, format="JPEG")
    return out.getvalue()


def answer(stream: str, stream_time: float, question: str, text: str, auto: bool = False, **extra) -> dict:
    return make_event("answer", stream=stream, stream_time=stream_time, question=question, answer=text, auto=auto,
                      round=1, **extra)  # fmt: skip


def clip(stream: str, stream_time: float, value: int = 90) -> ClipEvent:
    return make_event(
        "clip",
        stream=stream,
        index=int(stream_time // 4),
        stream_time=stream_time,
        t_start=stream_time - 4,
        preview=frame(value),
    )


def rows(path: Path, sql: str = "SELECT * FROM moments ORDER BY id") -> list[sqlite3.Row]:
    conn = sqlite3.connect(path)
    conn.row_factory = sqlite3.Row
    try:
        return conn.execute(sql).fetchall()
    finally:
        conn.close()


def run_writer(config: TimelineConfig, events: list[dict], errors: list[str] | None = None) -> TimelineWriter:
    """Publishes `events` on a bus the writer subscribes to, then closes the writer (everything written)."""
    bus = EventBus()
    writer = TimelineWriter(config, on_error=errors.append if errors is not None else None)
    bus.subscribe(writer)
    writer.start()
    for event in events:
        bus.publish(event)
    bus.unsubscribe(writer)
    writer.close(timeout=30.0)
    return writer


def test_new_timeline_is_private_wal_with_schema(tmp_path):
    path = tmp_path / "data" / "timeline.sqlite"
    store = TimelineStore(TimelineConfig(path))
    store.close()
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    conn = sqlite3.connect(path)
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    assert conn.execute("PRAGMA auto_vacuum").fetchone()[0] == 2  # incremental
    names = {row[0] for row in conn.execute("SELECT name FROM sqlite_master")}
    assert {"moments", "thumbnails", "moments_fts", "moments_ai", "moments_ad"} <= names
    conn.close()
    TimelineStore(TimelineConfig(path)).close()  # opens again


def test_writer_records_answers_alerts_and_stream_events(timeline_location):
    path = timeline_location
    evidence = [{"stream": "yard", "start": 120.0, "end": 124.0, "source": "recall"},
                {"stream": "yard", "start": 130.0, "end": 131.0, "source": "attention"},
                {"stream": "yard", "start": 3.0, "end": 4.0, "source": "timeline", "row_id": 1}]  # fmt: skip
    events = [
        make_event("status", stream="door", message="watching door.mp4"),
        make_event("status", stream=None, message="assistant ready"),  # not about a stream: not kept
        clip("door", 4.0, 10),
        clip("door", 8.0, 250),
        answer("door", 8.0, "Is a truck at the door?", "Yes, a red truck."),
        clip("door", 16.0, 10),
        answer("door", 16.0, "What happens?", "The truck leaves.", auto=True),
        answer("yard", 140.0, "When did the dog come?", "At 2:00.", evidence=evidence),
        make_event("check", stream="door", alert="truck", p_yes=0.9, ms=3.0, stream_time=16.0),
        make_event("alert", stream="door", id="door-truck", alert="truck", state="begin", p_yes=0.93,
                   stream_time=16.0, question="Is a truck visible?", snapshot=jpeg(frame(200, 1280, 720))),
        make_event("alert", stream="door", id="door-truck", alert="truck", state="end", p_yes=0.1,
                   stream_time=40.0, duration_s=24.0, question="Is a truck visible?"),
        make_event("error", stream="door", where="capture", message="door.mp4 is down", stream_time=40.0),
        make_event("error", stream="door", where="timeline", message="its own error"),  # not written back
        make_event("end", stream="door", reason="eof", message="end of file", stream_time=44.0),
    ]  # fmt: skip
    writer = run_writer(TimelineConfig(path), events)
    assert writer.written == 8 and writer.dropped == 0 and not writer.failed
    found = query(path, "SELECT * FROM moments ORDER BY id")
    by_kind = [(r["kind"], r["stream"], r["state"], r["who"]) for r in found]
    assert by_kind == [
        ("stream", "door", "start", None),
        ("answer", "door", None, "person"),
        ("answer", "door", None, "standing"),
        ("answer", "yard", None, "person"),
        ("alert", "door", "begin", "watch"),
        ("alert", "door", "end", "watch"),
        ("stream", "door", "error", None),
        ("stream", "door", "end", None),
    ]
    first, second, cited, begin, end = found[1], found[2], found[3], found[4], found[5]
    assert (first["start_s"], first["end_s"]) == (0.0, 8.0)
    assert (second["start_s"], second["end_s"]) == (8.0, 16.0)
    # from the earliest clip of this run it cites (notes from the timeline may be of another run) to the answer
    assert (cited["start_s"], cited["end_s"]) == (120.0, 140.0) and "recall" in cited["evidence"]
    assert (first["question"], first["text"]) == ("Is a truck at the door?", "Yes, a red truck.")
    assert (begin["alert"], begin["alert_id"], begin["p_yes"]) == ("truck", "door-truck", 0.93)
    assert (end["start_s"], end["end_s"], end["duration_s"]) == (16.0, 40.0, 24.0)
    assert found[6]["text"] == "capture: door.mp4 is down"
    thumbs = {r["moment_id"]: bytes(r["jpeg"]) for r in query(path, "SELECT moment_id, jpeg FROM thumbnails")}
    assert set(thumbs) == {first["id"], second["id"], begin["id"], end["id"]}  # yard had no clip
    pictures = {key: Image.open(io.BytesIO(value)) for key, value in thumbs.items()}
    assert all(p.format == "JPEG" and p.width == 160 and p.height == 90 for p in pictures.values())
    # the answer at 8 s got the bright clip that ended at 8 s, the one at 16 s the dark clip of 16 s
    assert np.asarray(pictures[first["id"]]).mean() > np.asarray(pictures[second["id"]]).mean() + 50


def test_retention_by_days_deletes_rows_and_thumbnails(timeline_location):
    path = timeline_location
    now = 1_700_000_000.0
    store = TimelineStore(TimelineConfig(path, days=2))
    ages_days = [5, 3, 2.5, 1, 0.1]
    store.write([Row("answer", now - age * 86400, "door", 0, 1, "truck?", f"truck {age}", "person",
                     thumbnail=b"\xff\xd8jpeg") for age in ages_days])  # fmt: skip
    assert store.enforce_retention(now) == 3
    store.close()
    kept = query(path, "SELECT * FROM moments ORDER BY id")
    assert [r["text"] for r in kept] == ["truck 1", "truck 0.1"]
    thumbs = query(path, "SELECT moment_id FROM thumbnails")
    assert sorted(r["moment_id"] for r in thumbs) == sorted(r["id"] for r in kept)
    if is_postgres(path):
        matches = query(path, "SELECT id FROM moments WHERE search @@ to_tsquery('english', 'truck')")
    else:
        matches = query(path, "SELECT rowid AS id FROM moments_fts WHERE moments_fts MATCH 'truck'")
    assert sorted(r["id"] for r in matches) == sorted(r["id"] for r in kept)


def test_size_bound_holds_after_many_writes(timeline_location):
    path = timeline_location
    config = TimelineConfig(path, max_bytes=1024 * 1024, check_every=16, wal_bytes=256 * 1024)
    store = TimelineStore(config)
    rng = np.random.default_rng(0)
    thumb_size, total = 4000, 1500  # about 6 MB written in all
    start = time.time() - total
    for index in range(total):
        thumbnail = rng.integers(0, 256, thumb_size, np.uint8).tobytes()
        store.write([Row("answer", start + index, "door", index, index + 1, "what do you see?",
                         f"answer number {index} about a truck", "standing", thumbnail=thumbnail)])  # fmt: skip
    used = store.used_bytes()
    store.close()
    slack = config.check_every * (thumb_size + 2048)  # rows written since the last check
    assert used <= config.max_bytes + slack
    kept = query(path, "SELECT min(id) AS first, max(id) AS last, count(*) AS n FROM moments")[0]
    assert kept["last"] == total and kept["first"] > 1 and 100 < kept["n"] < total  # the newest kept, the oldest gone
    assert count(path, "thumbnails") == kept["n"]
    if not is_postgres(path):
        assert path.stat().st_size <= config.max_bytes + slack  # the file shrank back at the checkpoint
        assert rows(path, "PRAGMA integrity_check")[0][0] == "ok"


def test_unwritable_path_is_a_timeline_error(tmp_path):
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    with pytest.raises(TimelineError, match="choose another --timeline or fix the folder's permissions"):
        TimelineStore(TimelineConfig(blocker / "timeline.sqlite"))
    assert blocker.read_text() == "not a folder"


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes into read-only folders")
def test_read_only_folder_is_a_timeline_error(tmp_path):
    folder = tmp_path / "locked"
    folder.mkdir(mode=0o500)
    with pytest.raises(TimelineError, match="choose another --timeline"):
        TimelineStore(TimelineConfig(folder / "timeline.sqlite"))


def damaged_timeline(path: Path) -> None:
    store = TimelineStore(TimelineConfig(path))
    store.write([Row("answer", 1e9 + i, "door", 0, 1, "q", "a" * 3000, "person") for i in range(50)])
    store.close()
    data = bytearray(path.read_bytes())
    data[3 * 4096 : 5 * 4096] = os.urandom(2 * 4096)  # pages of the table and its index
    path.write_bytes(bytes(data))


@pytest.mark.parametrize("content", ["garbage", "damaged", "foreign"])
def test_corrupt_or_foreign_file_is_left_untouched(tmp_path, content):
    path = tmp_path / "timeline.sqlite"
    if content == "garbage":
        path.write_bytes(b"this is my diary, not a database\n" * 200)
    elif content == "damaged":
        damaged_timeline(path)
    else:
        conn = sqlite3.connect(path)
        conn.execute("CREATE TABLE recipes (name TEXT)")
        conn.commit()
        conn.close()
    before = path.read_bytes()
    with pytest.raises(TimelineError, match="move it aside") as raised:
        TimelineStore(TimelineConfig(path))
    assert str(path) in str(raised.value)
    assert path.read_bytes() == before


def test_removed_file_stops_the_writer_with_one_error(tmp_path):
    path = tmp_path / "timeline.sqlite"
    errors: list[str] = []
    events = [answer("door", 4.0 * i, "truck?", "no") for i in range(1, 100)]
    writer = TimelineWriter(TimelineConfig(path), on_error=errors.append)
    path.unlink()
    bus = EventBus()
    bus.subscribe(writer)
    writer.start()
    for event in events:
        bus.publish(event)
    writer.close(timeout=30.0)
    assert len(errors) == 1 and "was removed" in errors[0] and writer.failed
    writer(answer("door", 999.0, "truck?", "no"))  # after the failure: ignored, returns
    assert not path.exists()  # not created again


def test_read_only_file_stops_the_writer_with_one_error(tmp_path):
    path = tmp_path / "timeline.sqlite"
    errors: list[str] = []
    writer = TimelineWriter(TimelineConfig(path), on_error=errors.append)
    path.chmod(0o400)
    bus = EventBus()
    bus.subscribe(writer)
    writer.start()
    for i in range(1, 100):
        bus.publish(answer("door", 4.0 * i, "truck?", "no"))
    writer.close(timeout=30.0)
    assert len(errors) == 1 and "read-only" in errors[0]
    assert rows(path, "SELECT count(*) FROM moments")[0][0] == 0


def test_full_disk_stops_the_writer_with_one_error(tmp_path):
    path = tmp_path / "timeline.sqlite"
    errors: list[str] = []
    writer = TimelineWriter(TimelineConfig(path, queue_size=1000), on_error=errors.append)
    pages = writer.store.conn.execute("PRAGMA page_count").fetchone()[0]
    writer.store.conn.execute(f"PRAGMA max_page_count = {pages + 100}")  # the disk is full after ~400 KB
    events = [clip("door", 2.0)] + [answer("door", 4.0 * i, "truck?", "x" * 1000) for i in range(1, 400)]
    writer = run_writer_from(writer, events)
    assert len(errors) == 1 and "full" in errors[0] and writer.failed
    written = writer.written
    assert 0 < written < 399
    assert rows(path, "SELECT count(*) FROM moments")[0][0] == written  # every committed batch is whole
    assert rows(path, "PRAGMA integrity_check")[0][0] == "ok"


def run_writer_from(writer: TimelineWriter, events: list[dict]) -> TimelineWriter:
    bus = EventBus()
    bus.subscribe(writer)
    writer.start()
    for event in events:
        bus.publish(event)
    writer.close(timeout=30.0)
    return writer


def test_a_stuck_disk_never_blocks_the_publisher(tmp_path):
    """Another connection holds the write lock: the writer's thread waits in SQLite's busy handler, and
    `__call__` keeps returning at once, dropping the oldest events (structure: it only puts into a
    drop-oldest queue)."""
    path = tmp_path / "timeline.sqlite"
    queue_size = 8
    writer = TimelineWriter(TimelineConfig(path, queue_size=queue_size, busy_timeout_s=60.0))
    blocker = sqlite3.connect(path, isolation_level=None)
    blocker.execute("BEGIN EXCLUSIVE")
    writer.start()
    writer(answer("door", 1.0, "first?", "yes"))
    deadline = time.monotonic() + 30.0
    while writer.worker.queued and time.monotonic() < deadline:  # the writer took it and now waits
        time.sleep(0.01)
    for i in range(1000):
        writer(answer("door", 2.0 + i, "truck?", "no"))
    assert writer.dropped >= 1000 - 2 * queue_size
    blocker.execute("ROLLBACK")
    blocker.close()
    writer.close(timeout=60.0)
    assert not writer.failed
    assert writer.written == 1001 - writer.dropped
    assert rows(path, "SELECT count(*) FROM moments")[0][0] == writer.written


def test_an_alert_is_written_once_and_a_row_once(timeline_location):
    """The fleet's rule: an alert's begin (or end) published twice, or a row written again after a lost commit,
    is kept once."""
    begin = make_event("alert", stream="door", id="door-truck-1", alert="truck", state="begin", p_yes=0.9,
                       stream_time=16.0, question="Is a truck visible?")  # fmt: skip
    end = dataclasses.replace(begin, state="end", duration_s=4.0, stream_time=20.0)
    later = dataclasses.replace(begin, t_wall=1.0)
    writer = run_writer(TimelineConfig(timeline_location), [begin, begin, end, later, end])
    assert writer.written == 2 and not writer.failed
    states = [r["state"] for r in query(timeline_location, "SELECT state FROM moments ORDER BY id")]
    assert states == ["begin", "end"]
    store = TimelineStore(TimelineConfig(timeline_location))
    row = Row("answer", 5.0, "door", 0, 1, "truck?", "a truck", "person")
    assert store.write([row]) == 1
    again = 0 if is_postgres(timeline_location) else 1  # only PostgreSQL keeps the row's uid
    assert store.write([row]) == again
    store.close()
    assert count(timeline_location) == 3 + again
