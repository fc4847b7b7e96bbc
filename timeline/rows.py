"""One row of the timeline, as every backend stores it (see database.SCHEMA and pg_schema.SCHEMA)."""

from __future__ import annotations

import uuid
from dataclasses import astuple, dataclass, field, fields


def new_uid() -> str:
    return uuid.uuid4().hex


@dataclass(frozen=True)
class Row:
    """One row of `moments` and its thumbnail (JPEG), if any. `uid` is made once per row: writing the same
    row again (a retry after the database went away mid-commit) is refused by the backends that keep it
    (PostgreSQL); an alert's begin and end are refused twice by every backend (their `alert_id`), and so is an
    event with an `event_key` (a fleet's spooled alert or answer, `bus.receipt`: `<spool id>:<seq>`) whichever
    run delivers it again."""

    kind: str
    t_wall: float
    stream: str | None
    start_s: float | None = None
    end_s: float | None = None
    question: str | None = None
    text: str | None = None
    who: str | None = None
    p_yes: float | None = None
    alert: str | None = None
    alert_id: str | None = None
    state: str | None = None
    duration_s: float | None = None
    round: int | None = None
    evidence: str | None = None
    event_key: str | None = None
    thumbnail: bytes | None = None
    uid: str = field(default_factory=new_uid, compare=False)

    def values(self) -> tuple:
        """The values of `COLUMNS`, in their order."""
        return astuple(self)[: len(COLUMNS)]


COLUMNS = [f.name for f in fields(Row) if f.name not in ("thumbnail", "uid")]
