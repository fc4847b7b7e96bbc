"""`python -m app history --summary | --recap`: what happened in a period, as readable lines (timeline.summary,
timeline.recap). Stored names and texts are anyone's: what reaches the terminal has its controls removed."""

from __future__ import annotations

import time

from bus.clock import clock
from bus.text_safety import printable
from timeline.recap import Recap, recap_text
from timeline.summary import StreamSummary, Summary, WatchSummary

MAX_NAMES = 50  # names listed when one is unknown


def _one_line(text: str) -> str:
    return " ".join(printable(text).split())


def _local(t_wall: float, form: str = "%Y-%m-%d %H:%M") -> str:
    return time.strftime(form, time.localtime(t_wall))


def watch_lines(watch: WatchSummary, bucket: str | None) -> list[str]:
    """One watch: how many times it began, how long it was on (HH:MM:SS), first and last begin; its buckets."""
    name = f"watch {_one_line(watch.watch)} on {_one_line(watch.stream) or '-'}"
    times = f"began {watch.began} time(s), on {clock(watch.on_s)} in all (longest {clock(watch.longest_s)})"
    if watch.first is not None and watch.last is not None:
        times += f", first {_local(watch.first, '%H:%M:%S')}, last {_local(watch.last, '%H:%M:%S')}"
    lines = [f"{name}: {times}" + (", on now" if watch.on_now else "")]
    form = "%Y-%m-%d %H:00" if bucket == "hour" else "%Y-%m-%d"
    lines += [
        f"  {_local(b.start, form)}  began {b.began}, on {clock(b.on_s)}" for b in watch.buckets if b.began or b.on_s
    ]
    return lines


def stream_line(stream: StreamSummary) -> str:
    """One stream: its answers, alerts begun and time down (each gap: local times and why)."""
    line = f"stream {_one_line(stream.stream)}: {stream.answers} answer(s), {stream.alerts} alert(s) begun"
    line += f", down {clock(stream.down_s)}"
    gaps = [
        f"{_local(gap.start, '%H:%M:%S')}-{'now' if gap.end is None else _local(gap.end, '%H:%M:%S')} "
        f"({_one_line(gap.reason)})"
        for gap in stream.gaps
    ]
    return line + (f" in {len(gaps)} gap(s): {', '.join(gaps)}" if gaps else "")


def summary_text(summary: Summary) -> str:
    """The summary as lines: the period (local time), each watch, then each stream."""
    head = f"From {_local(summary.since)} to {_local(summary.until)} (local time)"
    if not summary.watches and not summary.streams:
        return f"{head}: no alert, no answer, no gap."
    lines = [f"{head}:"]
    for watch in summary.watches:
        lines += watch_lines(watch, summary.bucket)
    lines += [stream_line(stream) for stream in summary.streams]
    return "\n".join(lines)


def recap_lines(recap: Recap) -> str:
    """recap_text, without what a terminal would act on."""
    return printable(recap_text(recap))


def unknown_name(names: tuple[list[str], list[tuple[str, str]]], stream: str | None, watch: str | None) -> str | None:
    """What is wrong with `stream` / `watch` when the timeline holds no row of them (None: both known), naming
    those it does hold."""
    streams, watches = names
    if stream is not None and stream not in streams:
        return f"no stream named {_one_line(stream)!r} in the timeline; streams: {_listed(streams)}"
    seen = sorted({name for on, name in watches if stream in (None, on)})
    if watch is not None and watch not in seen:
        where = f" of stream {_one_line(stream)!r}" if stream is not None else ""
        return f"no watch named {_one_line(watch)!r}{where} in the timeline; watches: {_listed(seen)}"
    return None


def _listed(names: list[str]) -> str:
    shown = ", ".join(_one_line(name) for name in names[:MAX_NAMES]) or "none"
    return shown + (f" (and {len(names) - MAX_NAMES} more)" if len(names) > MAX_NAMES else "")
