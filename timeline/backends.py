"""Which backend keeps a timeline: an SQLite file (the embedded default, one box) or a PostgreSQL database
(`postgresql://...`, several boxes). The PostgreSQL side, and psycopg with it, is imported only when asked for."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from timeline.config import Location, TimelineConfig, TimelineError
from timeline.postgres_target import PostgresTarget
from timeline.sqlite_backend import SqliteReader, SqliteWriter


def open_writer(config: TimelineConfig) -> Any:
    """`SqliteWriter` or `PgWriter` for `config.path`; raises `TimelineError` saying what to do."""
    if isinstance(config.path, PostgresTarget):
        return _pg().PgWriter(config)
    return SqliteWriter(config)


def open_reader(location: Location, busy_timeout_s: float) -> Any:
    """`SqliteReader` or `PgReader` for `location`; raises `TimelineError` when it holds no timeline."""
    if isinstance(location, PostgresTarget):
        return _pg().PgReader(location)
    return SqliteReader(Path(location), busy_timeout_s)


def _pg() -> Any:
    try:
        import timeline.pg_backend as pg_backend
    except ImportError as err:
        raise TimelineError(f"a postgresql:// timeline needs psycopg: pip install 'psycopg[binary]' ({err})") from None
    return pg_backend
