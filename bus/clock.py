"""Stream time for people: HH:MM:SS, spans of it, and evidence merged into spans."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from bus.stats import EvidenceSpan

UNKNOWN = "--:--:--"
EPS_S = 1e-6


def clock(seconds: float | None) -> str:
    """Stream seconds as HH:MM:SS (hours may pass 24; negative reads as 0); `UNKNOWN` for None."""
    if seconds is None:
        return UNKNOWN
    whole = int(max(seconds, 0.0))
    return f"{whole // 3600:02d}:{whole % 3600 // 60:02d}:{whole % 60:02d}"


def span(start: float | None, end: float | None) -> str:
    """00:12:40-00:12:44; one time when both read the same; `UNKNOWN` when neither is known."""
    if start is None or end is None or clock(start) == clock(end):
        return clock(start if start is not None else end)
    return f"{clock(start)}-{clock(end)}"


@dataclass(frozen=True)
class Span:
    """Merged evidence: adjacent or overlapping clips of one stream and source. row_ids: its timeline rows."""

    stream: str | None
    source: str
    start: float
    end: float
    row_ids: tuple[int, ...] = ()

    @property
    def label(self) -> str:
        return f"{clock(self.start)}-{clock(self.end)} ({self.source})"


def merge_evidence(evidence: Iterable[EvidenceSpan]) -> list[Span]:
    """Spans per (stream, source), in the order each source first appears, each source's spans by time; spans
    that touch or overlap are merged."""
    groups: dict[tuple[str | None, str], list[EvidenceSpan]] = {}
    for item in evidence:
        groups.setdefault((item.stream, item.source), []).append(item)
    spans: list[Span] = []
    for (stream, source), items in groups.items():
        merged: list[Span] = []
        for item in sorted(items, key=lambda i: float(i.start)):
            start, end = float(item.start), float(item.end)
            rows = (item.row_id,) if item.row_id is not None else ()
            if merged and start <= merged[-1].end + EPS_S:
                last = merged[-1]
                merged[-1] = Span(stream, source, last.start, max(last.end, end), last.row_ids + rows)
            else:
                merged.append(Span(stream, source, start, end, rows))
        spans += merged
    return spans
