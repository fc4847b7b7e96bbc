"""What only the PostgreSQL timeline has: credentials (never in the URL, a private password file), start errors
(exit 2, redacted), a server lost and back while running (an error event, a bounded backlog, a status event,
nothing written twice), websearch syntax and ranking, several boxes writing one database, the schema itself."""

from __future__ import annotations

import subprocess
import sys
import time
from types import SimpleNamespace

import pytest

from app.__main__ import main as app_main
from app.startup import start_timeline_writer
from bus import ErrorEvent, EventBus, Status
from tests.support.app_helpers import REPO, video
from tests.support.event_helpers import make_event
from tests.support.in_process_main import run_app_here
from tests.support.mqtt_broker import free_port
from tests.support.postgres_server import PASSWORD
from tests.support.timeline_backends import count, query
from timeline import PostgresTarget, TimelineConfig, TimelineError, TimelineReader, TimelineWriter
from timeline.postgres_target import PASSWORD_ENV, read_password_file
from timeline.store import Row, TimelineStore

SECRET = "Sup3r-Secret-pw"
WAIT_S = 60.0


def history(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    """`python -m app history ARGS`, run by main() in this process (tests/support/in_process_main.py)."""
    return run_app_here("history", *args, env=env)


def wait_for(condition, what: str) -> None:
    deadline = time.monotonic() + WAIT_S
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


def answer(stream: str, stream_time: float, text: str) -> dict:
    return make_event("answer", stream=stream, stream_time=stream_time, question="what now?", answer=text,
                      auto=True, round=1)  # fmt: skip


def test_a_password_in_the_url_is_refused_without_echoing_it(tmp_path, capsys):
    url = f"postgresql://assistant:{SECRET}@127.0.0.1:{free_port()}/timeline"
    with pytest.raises(SystemExit) as exited:
        app_main(["--video", str(video(8)), "--model", "tiny", "--timeline", url])
    out, err = capsys.readouterr()
    assert exited.value.code == 2, err[-1500:]
    assert "password inside the --timeline URL is refused" in err
    assert SECRET not in err + out and "loading tiny" not in err
    found = history("truck", "--timeline", url.replace("postgresql", "postgres"))
    assert found.returncode == 2 and "password inside the --timeline URL is refused" in found.stderr
    assert SECRET not in found.stderr + found.stdout
    with pytest.raises(ValueError, match="refused") as raised:
        PostgresTarget.from_url(f"postgresql://u:{SECRET}@db.lan/x")
    assert SECRET not in str(raised.value)


def test_the_password_file_must_be_private(tmp_path, postgres_target):
    TimelineStore(TimelineConfig(postgres_target)).close()  # a timeline to read
    secret = tmp_path / "timeline-password"
    secret.write_text(PASSWORD + "\n")
    secret.chmod(0o644)
    args = ("--timeline", postgres_target.url, "--timeline-password-file", str(secret))
    refused = history("truck", *args)
    assert refused.returncode == 2 and "chmod 600" in refused.stderr and PASSWORD not in refused.stderr
    secret.chmod(0o600)
    assert read_password_file(secret) == PASSWORD
    found = history("truck", *args, env={PASSWORD_ENV: "", "PGPASSWORD": "wrong"})  # the file wins
    assert found.returncode == 0, found.stderr
    assert "no matching moments" in found.stderr
    empty = tmp_path / "empty"
    empty.touch(mode=0o600)
    with pytest.raises(ValueError, match="empty"):
        read_password_file(empty)


def test_start_errors_exit_2_with_the_reason_and_no_password(postgres_server, postgres_target, capsys, monkeypatch):
    unreachable = f"postgresql://assistant@127.0.0.1:{free_port()}/timeline"
    wrong = {PASSWORD_ENV: SECRET}
    right = {PASSWORD_ENV: PASSWORD}
    cases = [
        (unreachable, right, "cannot connect to the timeline postgresql://***@127.0.0.1"),
        (postgres_target.url, wrong, "password authentication failed"),
        (postgres_server.target("no_such_db").url, right, 'database "no_such_db" does not exist'),
        (postgres_target.url, right, "no timeline in postgresql://***@127.0.0.1"),  # history never creates one
    ]
    for url, env, reason in cases:
        done = history("truck", "--timeline", url, env=env)
        assert done.returncode == 2 and reason in done.stderr, (url, done.stderr)
        assert SECRET not in done.stderr and PASSWORD not in done.stderr
    monkeypatch.setenv(PASSWORD_ENV, SECRET)  # the wrong one
    code = app_main(["--video", str(video(8)), "--model", "tiny", "--timeline", postgres_target.url])
    err = capsys.readouterr().err
    assert code == 2 and "password authentication failed" in err, err[-1500:]
    assert SECRET not in err and "loading tiny" not in err  # refused before the model loads


def test_a_server_lost_and_back_is_an_error_event_then_writing_again(postgres_server, postgres_target):
    bus, events = EventBus(), []
    bus.subscribe(events.append)
    config = SimpleNamespace(timeline=TimelineConfig(postgres_target, queue_size=16))
    writer = start_timeline_writer(config, bus, None)
    try:
        for i in range(5):
            bus.publish(answer("door", 4.0 * i, f"before {i}"))
        wait_for(lambda: writer.written == 5, "the first rows")
        postgres_server.stop()
        for i in range(40):  # never blocks: the oldest beyond the queue are dropped
            bus.publish(answer("door", 100.0 + i, f"during {i}"))
        wait_for(lambda: any(isinstance(e, ErrorEvent) and e.where == "timeline" for e in events), "the error")
        postgres_server.start()
        wait_for(lambda: any(isinstance(e, Status) and "writing again" in e.message for e in events), "recovery")
        bus.publish(answer("door", 500.0, "after"))
        wait_for(lambda: writer.worker.queued == 0 and "after" in texts(postgres_target), "the row after")
    finally:
        bus.unsubscribe(writer)
        writer.close(timeout=30.0)
    errors = [e for e in events if isinstance(e, ErrorEvent)]
    assert len(errors) == 1 and "the database went away" in errors[0].message
    assert PASSWORD not in errors[0].message and not writer.failed
    kept = texts(postgres_target)
    assert kept[:5] == [f"before {i}" for i in range(5)] and kept[-1] == "after"
    during = kept[5:-1]
    assert during and len(during) == len(set(during)) and during[-1] == "during 39"  # nothing twice, newest kept
    assert writer.dropped == 40 - len(during) and writer.written == len(kept)
    recovered = next(e for e in events if isinstance(e, Status))
    assert "events dropped meanwhile" in recovered.message and PASSWORD not in recovered.message


def texts(target: PostgresTarget) -> list[str]:
    return [r["text"] for r in query(target, "SELECT text FROM moments ORDER BY id")]


def test_websearch_syntax_and_ranking(postgres_target):
    now = time.time()
    store = TimelineStore(TimelineConfig(postgres_target))
    store.write(
        [
            Row("answer", now - 50, "door", 0, 1, "what is there?", "A red car parks by the gate."),
            Row("answer", now - 40, "door", 0, 1, "what is there?", "A blue car and a red car."),
            Row("answer", now - 30, "door", 0, 1, "what is there?", "The car is red."),
            Row("answer", now - 20, "door", 0, 1, "what is there?", "A red truck."),
            Row("answer", now - 10, "yard", 0, 1, "is a fox there?", "Something moves near the fox den."),
            Row("alert", now - 5, "yard", 0, 1, "is an animal there?", "fox began", "watch", alert="fox"),
        ]
    )
    store.close()
    with TimelineReader(postgres_target) as reader:
        assert [m.text for m in reader.search('"red car" -blue')] == ["A red car parks by the gate."]
        assert [m.text for m in reader.search('"car red"')] == []  # a phrase keeps its order
        anywords = [m.text for m in reader.search("red cars")]  # any word, stemmed; both words rank first
        assert len(anywords) == 4 and anywords[-1] == "A red truck."
        assert [m.text for m in reader.search("truck or fox")][-1] == "A red truck."
        fox = reader.search("fox")
        assert [m.kind for m in fox] == ["alert", "answer"]  # the alert's name weighs twice
        assert [m.text for m in reader.search("-car -fox", stream="door")] == ["A red truck."]
    where = ("--timeline", postgres_target.url)
    found = history(*where, "--", '"red car"', "-blue", env={PASSWORD_ENV: PASSWORD})
    assert found.returncode == 0, found.stderr
    assert found.stdout.count("\n") == 1 and "A red car parks by the gate." in found.stdout


def test_several_boxes_write_one_database(postgres_target):
    config = TimelineConfig(postgres_target)
    boxes = [TimelineWriter(config), TimelineWriter(config)]
    alert = make_event("alert", stream="yard", id="yard-fox-1", alert="fox", state="begin", p_yes=0.9,
                       stream_time=3.0, question="Is a fox visible?")  # fmt: skip
    for box, stream in zip(boxes, ("door", "yard"), strict=True):
        box.start()
        box(answer(stream, 4.0, f"seen on {stream}"))
        box(alert)  # a moved stream's alert published again by its new host
    for box in boxes:
        box.close(timeout=30.0)
    assert sum(box.written for box in boxes) == 3
    with TimelineReader(postgres_target) as reader:
        assert {m.stream for m in reader.search("seen")} == {"door", "yard"}
        assert [m.alert for m in reader.search("fox")] == ["fox"]


def test_schema_and_foreign_tables(postgres_target):
    with pytest.raises(TimelineError, match="no timeline in"):
        TimelineReader(postgres_target)
    TimelineStore(TimelineConfig(postgres_target)).close()
    TimelineStore(TimelineConfig(postgres_target)).close()  # opens again
    index = query(postgres_target, "SELECT indexdef FROM pg_indexes WHERE indexname = 'moments_search'")
    assert "USING gin (search)" in index[0]["indexdef"]
    generated = query(postgres_target, "SELECT attgenerated FROM pg_attribute WHERE attname = 'search' "
                      "AND attrelid = 'moments'::regclass")  # fmt: skip
    assert generated == [{"attgenerated": "s"}]
    query(postgres_target, "DROP TABLE thumbnails, moments, timeline_meta")
    query(postgres_target, "CREATE TABLE moments (recipe text)")
    with pytest.raises(TimelineError, match="not a timeline's"):
        TimelineStore(TimelineConfig(postgres_target))
    assert count(postgres_target) == 0 and query(postgres_target, "SELECT to_regclass('timeline_meta') AS t") == [
        {"t": None}
    ]


def test_psycopg_is_imported_only_for_a_postgresql_timeline(tmp_path):
    code = (
        "import sys; from pathlib import Path; import terminal.history;"
        "from timeline import TimelineConfig, TimelineReader; from timeline.store import Row, TimelineStore;"
        f"s = TimelineStore(TimelineConfig(Path({str(tmp_path / 't.sqlite')!r}))); s.write([Row('answer', 1.0, 'd')]);"
        "s.close(); assert 'psycopg' not in sys.modules, 'psycopg imported'"
    )
    done = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-1500:]


def test_closing_while_the_server_is_away_ends_within_its_timeout(postgres_server, postgres_target):
    errors: list[str] = []
    writer = TimelineWriter(TimelineConfig(postgres_target), on_error=errors.append)
    writer.start()
    writer(answer("door", 1.0, "kept"))
    wait_for(lambda: writer.written == 1, "the first row")
    postgres_server.stop()
    try:
        writer(answer("door", 2.0, "never written"))
        wait_for(lambda: errors, "the error")
        writer.close(timeout=2.0)
        writer.worker._thread.join(10.0)
        assert not writer.worker._thread.is_alive()  # gave up at the timeout instead of reconnecting forever
    finally:
        postgres_server.start()
    assert len(errors) == 1 and not writer.failed
    assert texts(postgres_target) == ["kept"]


def test_the_page_searches_it_and_shows_its_thumbnails(postgres_target):
    from app.front_door import TimelineHistory

    store = TimelineStore(TimelineConfig(postgres_target))
    store.write([Row("answer", time.time(), "door", 0, 4, "truck?", "a truck", "person", thumbnail=b"\xff\xd8jpeg")])
    store.close()
    page = TimelineHistory(postgres_target)
    (found,) = page.search("truck", since_s=3600, stream="door", limit=5)
    assert found.has_thumbnail and page.thumbnails([found.id, found.id + 1]) == {found.id: b"\xff\xd8jpeg"}


def test_a_config_file_gets_the_same_checks(tmp_path, capsys):
    from app.cli import main

    loose = tmp_path / "loose-password"
    loose.write_text(SECRET + "\n")
    loose.chmod(0o640)
    url = f"postgresql://assistant@127.0.0.1:{free_port()}/timeline"
    for body, message in [
        (f'timeline = "postgresql://assistant:{SECRET}@127.0.0.1/timeline"', "password inside the --timeline URL"),
        (f'timeline = "{url}"\ntimeline_password_file = "{loose}"', f"chmod 600 {loose}"),
        (f'timeline = "{tmp_path}/t.sqlite"\ntimeline_password_file = "{loose}"', "is for a postgresql:// --timeline"),
    ]:
        config = tmp_path / "site.toml"
        config.write_text(body + "\n", encoding="utf-8")
        with pytest.raises(SystemExit) as exited:
            main(["--config", str(config), "--video", str(video(8)), "--model", str(tmp_path / "no-model")])
        err = capsys.readouterr().err
        assert exited.value.code == 2 and message in err, err
        assert SECRET not in err and "loading" not in err


def test_a_locked_table_never_blocks_the_publisher(postgres_target):
    """Another box holds a lock on `moments`: the writer's thread waits in the server, and `__call__` keeps
    returning at once, dropping the oldest events (it only puts into a drop-oldest queue)."""
    import psycopg

    queue_size = 8
    writer = TimelineWriter(TimelineConfig(postgres_target, queue_size=queue_size))
    with psycopg.connect(**postgres_target.connect_kwargs()) as blocker:
        blocker.execute("LOCK TABLE moments IN ACCESS EXCLUSIVE MODE")  # held until the block's commit
        writer.start()
        writer(answer("door", 1.0, "first"))
        wait_for(lambda: writer.worker.queued == 0, "the writer to take the first event")
        for i in range(1000):
            writer(answer("door", 2.0 + i, f"later {i}"))
        assert writer.dropped >= 1000 - 2 * queue_size
    writer.close(timeout=60.0)
    assert not writer.failed and writer.written == 1001 - writer.dropped == count(postgres_target)
