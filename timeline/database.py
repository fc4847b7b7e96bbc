"""The timeline's SQLite file: its schema, and opening it for writing (created when missing) or reading.

One table `moments` holds every row (an answer, an alert's begin or end, a stream's start/stop/error; a fleet's
spooled alert or answer with its `event_key`, kept once: a timeline from before the key gets the column when it is
next opened for writing); the thumbnail of a row sits in `thumbnails` (deleted with its row by a trigger) and
`moments_fts` (FTS5, external content, kept in step by triggers) indexes the question, the text and the alert name.
WAL mode: readers never block the writer, and a killed writer leaves the file consistent (each batch is one
transaction). `auto_vacuum=INCREMENTAL`, so pages freed by retention can be given back to the file system.
"""

from __future__ import annotations

import logging
import os
import sqlite3
from pathlib import Path

from bus.private_paths import make_private_dir, make_private_file
from timeline.config import TimelineError, default_timeline_path

logger = logging.getLogger(__name__)

APPLICATION_ID = 0x45534154  # "ESAT": edge stream assistant timeline
SCHEMA_VERSION = 1
KINDS = ("answer", "alert", "stream")
WHO = ("person", "standing", "watch")

# an alert's begin and its end are kept once each, whoever writes them again (ids: "<stream>-<alert>-<ms>")
ALERT_ONCE = (
    "CREATE UNIQUE INDEX IF NOT EXISTS moments_alert_once ON moments (alert_id, state) "
    "WHERE kind = 'alert' AND alert_id IS NOT NULL;"
)
# a fleet's spooled alert or answer is kept once, whichever run of the head delivers it (key: "<spool id>:<seq>")
EVENT_KEY_ONCE = (
    "CREATE UNIQUE INDEX IF NOT EXISTS moments_event_key ON moments (event_key) WHERE event_key IS NOT NULL;"
)
# summaries of a period (timeline.summary): rows of one kind in a time range, everything they read in the index
KIND_T_WALL = (
    "CREATE INDEX IF NOT EXISTS moments_kind_t_wall"
    " ON moments (kind, t_wall, stream, state, alert, alert_id, duration_s);"
)
SCHEMA = f"""
CREATE TABLE moments (
    id INTEGER PRIMARY KEY,
    kind TEXT NOT NULL CHECK (kind IN {KINDS}),
    t_wall REAL NOT NULL,              -- seconds since the epoch
    stream TEXT,
    start_s REAL,                      -- the stream-time span the row covers (seconds)
    end_s REAL,
    question TEXT,                     -- answers: the question; alerts: the watch's question
    text TEXT,                         -- answers: the answer; alerts: "<alert> began|ended"; streams: message
    who TEXT CHECK (who IS NULL OR who IN {WHO}),
    p_yes REAL,                        -- alerts (watches)
    alert TEXT,                        -- alerts: the watch's name
    alert_id TEXT,
    state TEXT,                        -- alerts: begin|end; streams: start|stop|status|error|end|<capture kind>
    duration_s REAL,                   -- alerts at end
    round INTEGER,                     -- answers
    evidence TEXT,                     -- answers: JSON list of {{stream, start, end, source, ...}}
    event_key TEXT                     -- the spooled alert or answer of a fleet: "<spool id>:<seq>"
);
CREATE INDEX moments_t_wall ON moments (t_wall);
CREATE INDEX moments_stream_t_wall ON moments (stream, t_wall);
{ALERT_ONCE}
{EVENT_KEY_ONCE}
{KIND_T_WALL}
CREATE TABLE thumbnails (moment_id INTEGER PRIMARY KEY, jpeg BLOB NOT NULL);
CREATE VIRTUAL TABLE moments_fts USING fts5 (
    question, text, alert, content='moments', content_rowid='id', tokenize='porter unicode61'
);
CREATE TRIGGER moments_ai AFTER INSERT ON moments BEGIN
    INSERT INTO moments_fts (rowid, question, text, alert) VALUES (new.id, new.question, new.text, new.alert);
END;
CREATE TRIGGER moments_ad AFTER DELETE ON moments BEGIN
    INSERT INTO moments_fts (moments_fts, rowid, question, text, alert)
        VALUES ('delete', old.id, old.question, old.text, old.alert);
    DELETE FROM thumbnails WHERE moment_id = old.id;
END;
"""

MOVE_ASIDE = "move it aside (e.g. mv {path} {path}.bad) to start a new timeline, or choose another --timeline"
UNWRITABLE = "choose another --timeline or fix the folder's permissions"


def open_for_writing(path: Path, busy_timeout_s: float, wal_bytes: int) -> sqlite3.Connection:
    """The writer's connection; creates the file (mode 0600) and its folder (0700) when missing.

    The file is checked (`PRAGMA quick_check`, the schema's id and version) before anything is written to
    it: a file that is not a timeline is never changed. Raises `TimelineError` saying what to do.
    """
    _create_file(path)
    try:
        conn = sqlite3.connect(path, timeout=busy_timeout_s, isolation_level=None, check_same_thread=False)
    except sqlite3.Error as err:
        raise TimelineError(f"cannot open the timeline {path}: {err}; {UNWRITABLE}") from err
    try:
        _check(conn, path, allow_empty=True)
        if _table_count(conn) == 0:
            _create_schema(conn)
        _add_alert_once(conn, path)
        _add_event_key(conn)
        conn.execute(KIND_T_WALL)  # a timeline from before summaries gets it (built once, a second per million rows)
        conn.execute("PRAGMA journal_mode = WAL")
        conn.execute("PRAGMA synchronous = NORMAL")  # safe against a killed process in WAL mode
        conn.execute(f"PRAGMA journal_size_limit = {int(wal_bytes)}")
        conn.execute("PRAGMA foreign_keys = OFF")
    except TimelineError:
        conn.close()
        raise
    except sqlite3.Error as err:
        conn.close()
        raise TimelineError(f"cannot write to the timeline {path}: {err}; {UNWRITABLE}") from err
    return conn


def open_for_reading(path: Path, busy_timeout_s: float) -> sqlite3.Connection:
    """A read-only connection (the file is never created or changed). Raises `TimelineError`."""
    if not path.is_file():
        raise TimelineError(f"no timeline at {path}: it is written while the assistant runs; check --timeline")
    try:
        conn = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True, timeout=busy_timeout_s)
    except sqlite3.Error as err:
        raise TimelineError(f"cannot open the timeline {path}: {err}") from err
    try:
        _check(conn, path, allow_empty=False, quick=False)
    except sqlite3.Error as err:
        conn.close()
        raise TimelineError(f"cannot read the timeline {path}: {err}") from err
    except TimelineError:
        conn.close()
        raise
    return conn


def _create_file(path: Path) -> None:
    """The file with mode 0600 and its folder 0700; an existing folder others can read is made 0700 when it is
    ours and the timeline's own (the data folder, or one holding nothing but the timeline), else a warning."""
    try:
        make_private_dir(path.parent, own=_own_folder(path))
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        try:
            make_private_file(path)
        except OSError as err:
            raise TimelineError(f"cannot open the timeline {path}: {err.strerror or err}; {UNWRITABLE}") from err
        return
    except OSError as err:
        raise TimelineError(f"cannot create the timeline {path}: {err.strerror or err}; {UNWRITABLE}") from err
    os.close(fd)


def _own_folder(path: Path) -> bool:
    """True for the data folder, and for a folder holding nothing but this timeline's files (-wal, -shm)."""
    folder = path.parent
    if folder.resolve() == default_timeline_path().parent.resolve():
        return True
    try:
        return all(name.startswith(path.name) for name in os.listdir(folder))
    except OSError:
        return False  # missing: make_private_dir creates it 0700 anyway


def _table_count(conn: sqlite3.Connection) -> int:
    return conn.execute("SELECT count(*) FROM sqlite_master").fetchone()[0]


def _check(conn: sqlite3.Connection, path: Path, allow_empty: bool, quick: bool = True) -> None:
    """Raises `TimelineError` unless `path` holds a sound timeline (or, with `allow_empty`, nothing yet)."""
    try:
        tables = _table_count(conn)
        # An empty file has nothing to check; and SQLite (3.40) leaves a connection that ran quick_check on an
        # empty database unable to checkpoint its WAL later ("database table is locked").
        if quick and not (tables == 0 and allow_empty):
            problems = [row[0] for row in conn.execute("PRAGMA quick_check")]
            if problems != ["ok"]:
                raise TimelineError(f"the timeline {path} is damaged ({problems[0]}); {MOVE_ASIDE.format(path=path)}")
        app_id = conn.execute("PRAGMA application_id").fetchone()[0]
        version = conn.execute("PRAGMA user_version").fetchone()[0]
    except sqlite3.DatabaseError as err:
        if isinstance(err, sqlite3.OperationalError) and "unable to open" in str(err):
            raise
        raise TimelineError(f"{path} is not a readable timeline ({err}); {MOVE_ASIDE.format(path=path)}") from err
    if tables == 0 and allow_empty:
        return
    if app_id != APPLICATION_ID:
        raise TimelineError(f"{path} is an SQLite file but not a timeline; {MOVE_ASIDE.format(path=path)}")
    if version != SCHEMA_VERSION:
        raise TimelineError(
            f"{path} is a timeline of another version ({version}, expected {SCHEMA_VERSION}); "
            f"{MOVE_ASIDE.format(path=path)}"
        )


def _add_alert_once(conn: sqlite3.Connection, path: Path) -> None:
    """The alert-once index on a timeline written before it existed (a file holding repeats goes on without)."""
    try:
        conn.execute(ALERT_ONCE)
    except sqlite3.IntegrityError:
        logger.warning("timeline %s holds repeated alerts: repeats are not refused in it", path)


def _add_event_key(conn: sqlite3.Connection) -> None:
    """The `event_key` column and its unique index on a timeline written before they existed (its rows keep no key;
    the schema's version stays: a program that knows nothing of the column still reads and writes the file)."""
    columns = {row[1] for row in conn.execute("PRAGMA table_info(moments)")}
    if "event_key" in columns:
        conn.execute(EVENT_KEY_ONCE)
        return
    conn.execute("BEGIN IMMEDIATE")
    try:
        conn.execute("ALTER TABLE moments ADD COLUMN event_key TEXT")
        conn.execute(EVENT_KEY_ONCE)
        conn.execute("COMMIT")
    except sqlite3.Error:
        conn.execute("ROLLBACK")
        raise


def _create_schema(conn: sqlite3.Connection) -> None:
    conn.execute("PRAGMA auto_vacuum = INCREMENTAL")  # only takes effect before the first table
    script = f"PRAGMA application_id = {APPLICATION_ID}; PRAGMA user_version = {SCHEMA_VERSION};"
    try:
        conn.executescript(f"BEGIN IMMEDIATE; {SCHEMA} {script} COMMIT;")
    except sqlite3.Error:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        raise
