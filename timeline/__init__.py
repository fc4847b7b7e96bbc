"""Tier 3 of the assistant's memory: a timeline of every answer, alert and stream event in SQLite (WAL,
FTS5; one box) or PostgreSQL (tsvector; several boxes, one database), with thumbnails, kept for `days` and under
`max_bytes`, searchable by words, time and stream."""

from timeline.config import TimelineConfig, TimelineError, default_timeline_path, timeline_location
from timeline.postgres_target import PostgresTarget
from timeline.reader import Moment, TimelineReader
from timeline.writer import TimelineWriter

__all__ = [
    "Moment",
    "PostgresTarget",
    "TimelineConfig",
    "TimelineError",
    "TimelineReader",
    "TimelineWriter",
    "default_timeline_path",
    "timeline_location",
]
