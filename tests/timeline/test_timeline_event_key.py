"""A fleet's spooled alerts and answers are kept once in the timeline (SQLite and PostgreSQL): each row holds the
event's durable key (`event_key`, `<spool id>:<seq>`, bus/receipt.py) and a repeat (the same event delivered again
by the next run of a head that died before its host heard it was delivered) is ignored; rows without a key (a
one-box run) are never refused for it. A timeline written before the key existed gets the column when it is next
opened for writing, keeping its rows."""

from __future__ import annotations

import dataclasses
import shutil
from pathlib import Path

from bus import Event
from bus.receipt import Receipt
from tests.support.event_helpers import make_event
from tests.support.timeline_backends import is_postgres, query
from timeline import TimelineConfig, TimelineReader, TimelineWriter
from timeline.store import Row, TimelineStore

WAIT_S = 30.0
OLD_FILE = Path(__file__).resolve().parents[1] / "data" / "timeline-before-event-key.sqlite"


def answer(text: str, key: str | None = None) -> Event:
    event = make_event("answer", stream="door", round=1, stream_time=1.0, question="who?", answer=text)
    return event if key is None else dataclasses.replace(event, receipt=Receipt(key, lambda: None))


def publish(writer: TimelineWriter, event: Event) -> None:
    """What the bus does (the writer holds what it queued), then the publisher's own hold let go."""
    writer(event)
    if event.receipt is not None:
        event.receipt.release()


def columns(location) -> set[str]:
    if is_postgres(location):
        sql = "SELECT column_name AS name FROM information_schema.columns WHERE table_name = 'moments'"
        return {row["name"] for row in query(location, sql)}
    return {row["name"] for row in query(location, "PRAGMA table_info(moments)")}


def test_a_repeated_event_key_is_written_once_whichever_run_writes_it(timeline_location):
    for run in ("the head that died", "the next head"):
        writer = TimelineWriter(TimelineConfig(timeline_location))
        writer.start()
        try:
            publish(writer, answer(f"kept ({run})", "a-0-77-cafe:1"))
            publish(writer, answer(f"a repeat ({run})", "a-0-77-cafe:1"))
            publish(writer, answer(f"its next ({run})", "a-0-77-cafe:2"))
            publish(writer, answer(f"unkeyed ({run})"))
        finally:
            writer.close(timeout=WAIT_S)
        assert writer.error is None
    rows = query(timeline_location, "SELECT event_key, text FROM moments ORDER BY id")
    assert [(r["event_key"], r["text"]) for r in rows] == [
        ("a-0-77-cafe:1", "kept (the head that died)"),
        ("a-0-77-cafe:2", "its next (the head that died)"),
        (None, "unkeyed (the head that died)"),
        (None, "unkeyed (the next head)"),  # no key: nothing to refuse it by
    ]


def reopened_with_a_keyed_row(location) -> list[tuple]:
    """Opens the timeline for writing (the column is added), writes a keyed row twice; (key, text) of every row."""
    store = TimelineStore(TimelineConfig(location))
    try:
        keyed = Row(kind="answer", t_wall=2.0, stream="door", text="keyed", event_key="a-0-77-cafe:1")
        assert store.write([keyed, dataclasses.replace(keyed, text="a repeat")]) == 1
    finally:
        store.close()
    assert "event_key" in columns(location)
    return [(r["event_key"], r["text"]) for r in query(location, "SELECT event_key, text FROM moments ORDER BY id")]


def test_an_sqlite_timeline_from_before_the_key_gets_the_column_and_keeps_its_rows(tmp_path):
    path = tmp_path / "timeline.sqlite"
    shutil.copyfile(OLD_FILE, path)  # written by the version before the key (main at 14da366), one answer in it
    path.chmod(0o600)
    assert "event_key" not in columns(path)
    assert reopened_with_a_keyed_row(path) == [(None, "from the old version"), ("a-0-77-cafe:1", "keyed")]
    with TimelineReader(path) as reader:  # and it reads as before
        assert [m.text for m in reader.search(None, limit=10)] == ["keyed", "from the old version"]


def test_a_postgres_timeline_from_before_the_key_gets_the_column_and_keeps_its_rows(postgres_target):
    store = TimelineStore(TimelineConfig(postgres_target))
    store.write([Row(kind="answer", t_wall=1.0, stream="door", text="from the old version")])
    store.close()
    query(postgres_target, "ALTER TABLE moments DROP COLUMN event_key")  # the layout before the key (index too)
    assert "event_key" not in columns(postgres_target)
    assert reopened_with_a_keyed_row(postgres_target) == [(None, "from the old version"), ("a-0-77-cafe:1", "keyed")]
