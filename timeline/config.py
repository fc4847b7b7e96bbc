"""Where the timeline lives (an SQLite file, or a PostgreSQL database) and how much of it is kept (days,
bytes); the error its users see."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

from timeline.postgres_target import PostgresTarget, is_postgres_url

DATA_ENV = "EDGE_ASSISTANT_DATA"  # a folder; the timeline is `timeline.sqlite` in it
MIB = 1024 * 1024


Location = Path | PostgresTarget  # an SQLite file, or a PostgreSQL database shared by several boxes


class TimelineError(Exception):
    """The timeline cannot be opened or read; the message says what to do (the CLI exits 2 with it)."""


def default_timeline_path() -> Path:
    """`$EDGE_ASSISTANT_DATA/timeline.sqlite`, or `~/.cache/edge-stream-assistant/timeline.sqlite`."""
    folder = os.environ.get(DATA_ENV)
    base = Path(folder).expanduser() if folder else Path.home() / ".cache" / "edge-stream-assistant"
    return base / "timeline.sqlite"


def timeline_location(text: str | None, password_file: Path | None = None) -> Location:
    """`--timeline`'s value as a location: a `PostgresTarget` for `postgresql://...` (password from
    `password_file` or the environment), else a file (`default_timeline_path()` when None). ValueError naming
    the flag (and never quoting a password) otherwise."""
    if is_postgres_url(text):
        return PostgresTarget.from_url(str(text), password_file=password_file)
    if password_file is not None:
        raise ValueError("--timeline-password-file is for a postgresql:// --timeline")
    return Path(text).expanduser() if text else default_timeline_path()


@dataclass(frozen=True)
class TimelineConfig:
    """The timeline's settings.

    Args:
        path: the SQLite file (created with mode 0600, its folder with 0700, when missing), or a
            `PostgresTarget` (its tables are created when missing; see docs/timeline-postgres.md).
        days: rows older than this (wall time) are deleted.
        max_bytes: the database's pages in use are kept under this; the oldest rows go first. The WAL file
            comes on top of it, at most about `wal_bytes` after a checkpoint. PostgreSQL: the bytes of the rows
            and thumbnails kept (its indexes and not yet reused space come on top).
        wal_bytes: the write-ahead log is truncated back to this size after each checkpoint.
        check_every: retention (days, then bytes) runs after this many rows written.
        busy_timeout_s: how long a connection waits for a lock held by another writer before failing.
        queue_size: events kept while the writer is busy; beyond it the oldest is dropped (counted).
        previews_per_stream: recent clip previews kept per stream to pick an answer's thumbnail from.
        thumbnail_width: thumbnails are at most this wide (pixels), JPEG.
    """

    path: Location
    days: float = field(
        default=7.0, metadata={"flag": "--timeline-days", "help": "keep this many days", "unit": "days"}
    )
    max_bytes: int = field(
        default=256 * MIB,
        metadata={
            "flag": "--timeline-mb",
            "help": "keep the file under this many MiB",
            "type": float,
            "scale": MIB,
            "unit": "MiB",
        },
    )
    wal_bytes: int = 4 * MIB
    check_every: int = 64
    busy_timeout_s: float = 5.0
    queue_size: int = 256
    previews_per_stream: int = 8
    thumbnail_width: int = 160

    def __post_init__(self) -> None:
        if not self.days > 0:
            raise ValueError(f"timeline days must be > 0, got {self.days}")
        if self.max_bytes < MIB:
            raise ValueError(f"timeline max_bytes must be >= 1 MiB ({MIB}), got {self.max_bytes}")
        for name in ("check_every", "queue_size", "previews_per_stream", "thumbnail_width"):
            if getattr(self, name) < 1:
                raise ValueError(f"timeline {name} must be >= 1, got {getattr(self, name)}")
        if self.busy_timeout_s < 0 or self.wal_bytes < 0:
            raise ValueError("timeline busy_timeout_s and wal_bytes must be >= 0")

    @property
    def where(self) -> str:
        """The file, or the database's URL with its user redacted: safe to show and log."""
        return str(self.path)
