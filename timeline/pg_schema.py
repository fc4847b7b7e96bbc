"""The timeline in PostgreSQL: its schema, and connecting for writing (tables created when missing) or reading.

The same rows as the SQLite file (`moments`, `thumbnails`), with PostgreSQL's own full-text search: a generated
`tsvector` column (`english`: stemmed, stopwords dropped; the alert name weighted A, the question and text B)
under a GIN index. Thumbnails are `bytea` and go with their row (ON DELETE CASCADE). `uid` (unique) refuses a
row written twice, `moments_alert_once` an alert's begin or end written twice, whichever box writes it, and
`moments_event_key` a fleet's spooled alert or answer written again by a later run (a timeline from before the
key gets the column when it is next opened for writing).
`timeline_meta` names the schema and its version: a database holding other tables called `moments` is never
changed. psycopg is imported here only (the app without it works on SQLite).
"""

from __future__ import annotations

from typing import Any

from bus.redact import redact_source
from timeline.config import TimelineError
from timeline.database import KINDS, WHO
from timeline.postgres_target import PostgresTarget

APPLICATION = "edge-stream-assistant timeline"
SCHEMA_VERSION = "1"
TEXT_CONFIG = "english"
SCHEMA_LOCK = 0x45534154  # advisory lock: several boxes starting together create the tables once

# summaries of a period (timeline.summary): rows of one kind in a time range, everything they read in the index
KIND_T_WALL = (
    "CREATE INDEX IF NOT EXISTS moments_kind_t_wall"
    " ON moments (kind, t_wall, stream, state, alert, alert_id, duration_s);"
)
SCHEMA = f"""
CREATE TABLE timeline_meta (key text PRIMARY KEY, value text NOT NULL);
CREATE TABLE moments (
    id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    uid text NOT NULL UNIQUE,
    kind text NOT NULL CHECK (kind IN {KINDS}),
    t_wall double precision NOT NULL,
    stream text,
    start_s double precision,
    end_s double precision,
    question text,
    text text,
    who text CHECK (who IS NULL OR who IN {WHO}),
    p_yes double precision,
    alert text,
    alert_id text,
    state text,
    duration_s double precision,
    round integer,
    evidence text,
    event_key text,
    search tsvector GENERATED ALWAYS AS (
        setweight(to_tsvector('{TEXT_CONFIG}', coalesce(alert, '')), 'A')
        || setweight(to_tsvector('{TEXT_CONFIG}', coalesce(question, '')), 'B')
        || setweight(to_tsvector('{TEXT_CONFIG}', coalesce(text, '')), 'B')
    ) STORED
);
CREATE INDEX moments_t_wall ON moments (t_wall);
CREATE INDEX moments_stream_t_wall ON moments (stream, t_wall);
CREATE INDEX moments_search ON moments USING GIN (search);
CREATE UNIQUE INDEX moments_alert_once ON moments (alert_id, state) WHERE kind = 'alert' AND alert_id IS NOT NULL;
CREATE UNIQUE INDEX moments_event_key ON moments (event_key) WHERE event_key IS NOT NULL;
{KIND_T_WALL}
CREATE TABLE thumbnails (
    moment_id bigint PRIMARY KEY REFERENCES moments (id) ON DELETE CASCADE,
    jpeg bytea NOT NULL
);
ALTER TABLE thumbnails ALTER COLUMN jpeg SET STORAGE EXTERNAL;
"""
SETUP = "see docs/timeline-postgres.md for createuser/createdb"
# a timeline made before `event_key` existed gets it (its rows keep none; the version stays: older programs name
# their columns and go on working with it)
ADD_EVENT_KEY = (
    "ALTER TABLE moments ADD COLUMN event_key text;"
    " CREATE UNIQUE INDEX moments_event_key ON moments (event_key) WHERE event_key IS NOT NULL;"
)


def connect(target: PostgresTarget, read_only: bool = False) -> Any:
    """An autocommit psycopg connection. Raises `TimelineError` (redacted, on one line) when psycopg is missing
    or the server cannot be reached, refuses the login, or has no such database."""
    try:
        import psycopg
    except ImportError as err:
        raise TimelineError(f"a postgresql:// timeline needs psycopg: pip install 'psycopg[binary]' ({err})") from None
    try:
        kwargs = target.connect_kwargs(psycopg.pq.version())
    except ValueError as err:
        raise TimelineError(str(err)) from None
    if read_only:
        kwargs["options"] = "-c default_transaction_read_only=on"
    try:
        return psycopg.connect(autocommit=True, **kwargs)
    except psycopg.Error as err:
        raise TimelineError(f"cannot connect to the timeline {target}: {one_line(err)}; {SETUP}") from None


def one_line(err: BaseException) -> str:
    """An error's message on one line, with any URL's login redacted."""
    return redact_source(" ".join(str(err).split())) or type(err).__name__


def open_for_writing(target: PostgresTarget) -> Any:
    """The writer's connection; creates the tables when the database has none of them yet. Raises
    `TimelineError` for a database whose `moments` is not a timeline's, or of another version."""
    import psycopg

    conn = connect(target)
    try:
        with conn.transaction():
            conn.execute("SELECT pg_advisory_xact_lock(%s)", (SCHEMA_LOCK,))
            if _version(conn, target, allow_empty=True) is None:
                conn.execute(SCHEMA)
                conn.execute(
                    "INSERT INTO timeline_meta VALUES ('application', %s), ('version', %s)",
                    (APPLICATION, SCHEMA_VERSION),
                )
            elif not _has_column(conn, "moments", "event_key"):
                conn.execute(ADD_EVENT_KEY)
            # a timeline from before summaries (timeline.summary) gets their index
            conn.execute(KIND_T_WALL)
    except psycopg.Error as err:
        conn.close()
        raise TimelineError(f"cannot create the timeline's tables in {target}: {one_line(err)}; {SETUP}") from None
    except TimelineError:
        conn.close()
        raise
    return conn


def open_for_reading(target: PostgresTarget) -> Any:
    """A read-only connection to a database that holds a timeline. Raises `TimelineError`."""
    import psycopg

    conn = connect(target, read_only=True)
    try:
        _version(conn, target, allow_empty=False)
    except psycopg.Error as err:
        conn.close()
        raise TimelineError(f"cannot read the timeline {target}: {one_line(err)}") from None
    except TimelineError:
        conn.close()
        raise
    return conn


def _has_column(conn: Any, table: str, column: str) -> bool:
    sql = "SELECT 1 FROM pg_attribute WHERE attrelid = to_regclass(%s) AND attname = %s AND NOT attisdropped"
    return conn.execute(sql, (table, column)).fetchone() is not None


def _version(conn: Any, target: PostgresTarget, allow_empty: bool) -> str | None:
    """The schema's version, or None for a database without the timeline's tables (allowed when
    `allow_empty`). Raises `TimelineError` for foreign tables or another version."""
    meta, moments = conn.execute("SELECT to_regclass('timeline_meta'), to_regclass('moments')").fetchone()
    if meta is None:
        if moments is not None:
            raise TimelineError(f"{target} has a table `moments` that is not a timeline's; choose another database")
        if allow_empty:
            return None
        raise TimelineError(f"no timeline in {target}: it is written while the assistant runs; check --timeline")
    values = dict(conn.execute("SELECT key, value FROM timeline_meta").fetchall())
    if values.get("application") != APPLICATION:
        raise TimelineError(f"{target} has a table `timeline_meta` that is not a timeline's; choose another database")
    if values.get("version") != SCHEMA_VERSION:
        raise TimelineError(
            f"{target} holds a timeline of another version ({values.get('version')}, expected {SCHEMA_VERSION}); "
            "choose another database"
        )
    return values["version"]
