"""One timeline suite, two backends: `timeline_location` is an SQLite file, or a fresh PostgreSQL database on the
session's test server (tests/support/postgres_server.py); helpers read rows back from either, and give the command-line
arguments (and password environment) that reach it.

    def test_x(timeline_location):
        store = TimelineStore(TimelineConfig(timeline_location))
"""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import pytest

from timeline import PostgresTarget
from timeline.postgres_target import PASSWORD_ENV

BACKENDS = ("sqlite", "postgres")


@pytest.fixture(params=BACKENDS)
def timeline_location(request, tmp_path) -> Path | PostgresTarget:
    """Where a test's timeline lives: `tmp_path/timeline.sqlite`, or a new PostgreSQL database."""
    if request.param == "sqlite":
        return tmp_path / "timeline.sqlite"
    return request.getfixturevalue("postgres_target")


def is_postgres(location: object) -> bool:
    return isinstance(location, PostgresTarget)


def query(location: Path | PostgresTarget, sql: str, params: tuple = ()) -> list[dict[str, Any]]:
    """The rows of `sql` (placeholders `?`) as dicts, read through a connection of the test's own."""
    if is_postgres(location):
        import psycopg
        from psycopg.rows import dict_row

        with psycopg.connect(**location.connect_kwargs(), row_factory=dict_row) as conn:
            cursor = conn.execute(sql.replace("?", "%s"), params)
            return [dict(row) for row in cursor.fetchall()] if cursor.description else []
    conn = sqlite3.connect(location)
    conn.row_factory = sqlite3.Row
    try:
        rows = [dict(row) for row in conn.execute(sql, params).fetchall()]
        conn.commit()
        return rows
    finally:
        conn.close()


def count(location: Path | PostgresTarget, table: str = "moments") -> int:
    return query(location, f"SELECT count(*) AS n FROM {table}")[0]["n"]


def cli_args(location: Path | PostgresTarget) -> tuple[list[str], dict[str, str]]:
    """`--timeline` for a command line, and the environment that carries the password (never argv)."""
    if is_postgres(location):
        return ["--timeline", location.url], {PASSWORD_ENV: location.password or ""}
    return ["--timeline", str(location)], {}
