"""What the page shows of one watched stream, and how each of that stream's events changes it. Pure functions
of (view, event) -> view: no Gradio, no locks (ui.state holds the lock and the collection of views)."""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from bus import Answer, CaptureChange, Check, ClipEvent, ClipStats, Status, StatusKind, StreamState

STATES = (StreamState.IDLE, StreamState.WATCHING, StreamState.RECONNECTING, StreamState.ENDED)
RECENT_CLIPS = 8  # clip previews kept per stream, for the thumbnails of the evidence under answers


@dataclass(frozen=True, eq=False)
class StreamView:
    """One stream's panel. state: one of STATES. preview_version: the page-wide preview counter at this stream's
    latest frame (unique across streams, so one preview file per frame). lag_s: seconds behind real time at the
    latest clip. Sizes in bytes, counts in tokens, times in seconds of this stream."""

    name: str
    state: StreamState = StreamState.IDLE
    source: str | None = None  # what is being watched, None when idle
    stream_ended: str | None = None  # why the last source stopped
    preview: np.ndarray | None = None
    preview_time: float | None = None
    preview_clip: int | None = None
    preview_version: int = 0
    stream_time: float = 0.0
    lag_s: float | None = None
    clips: int = 0
    dropped_clips: int = 0
    cache_tokens: int = 0  # after the latest clip or answer
    budget: int = 0
    kv_bytes: int = 0
    clip: ClipStats = ClipStats()  # the latest clip's, as the session measured them (host store, cache)
    visual_clip: ClipStats = ClipStats()  # the latest clip's that said its visual tokens, full and kept
    visual_tokens_total: int = 0  # since the page started, over the clips that said both full and kept
    visual_tokens_kept_total: int = 0
    checks: tuple[tuple[str, float], ...] = ()  # each watch's latest p_yes: (alert name, p_yes), first checked first
    recent: tuple[
        tuple[float, float, np.ndarray], ...
    ] = ()  # the latest clips' (t_start, t_end, preview), oldest first
    host: str | None = None  # the fleet (--ray): the host it runs on; None in one process, or while it waits
    waiting: str | None = None  # the fleet: why it has no host now (the coordinator's words); None once placed


def _kept(view: StreamView, e: ClipEvent) -> dict:
    """The visual-token fields of `view` after clip event `e` (unchanged when `e` lacks them: dropping off in an
    older assistant)."""
    full, kept = e.stats.visual_tokens, e.stats.visual_tokens_kept
    if full is None or kept is None:
        return {}
    return dict(
        visual_clip=e.stats,
        visual_tokens_total=view.visual_tokens_total + int(full),
        visual_tokens_kept_total=view.visual_tokens_kept_total + int(kept),
    )


def on_clip(view: StreamView, e: ClipEvent, preview_version: int) -> StreamView:
    preview = e.preview
    has_frame = isinstance(preview, np.ndarray)
    t_end = float(e.stream_time)
    recent = (*view.recent, (float(e.t_start), t_end, preview))[-RECENT_CLIPS:] if has_frame else view.recent
    return replace(
        view,
        state=StreamState.WATCHING,
        preview=preview if has_frame else view.preview,
        preview_version=preview_version if has_frame else view.preview_version,
        preview_time=t_end,
        preview_clip=int(e.index),
        stream_time=t_end,
        lag_s=float(e.lag_s),
        clips=view.clips + 1,
        dropped_clips=int(e.dropped_clips),
        cache_tokens=int(e.stats.cache_tokens),
        budget=int(e.budget or view.budget),
        kv_bytes=int(e.stats.kv_bytes),
        clip=e.stats,
        stream_ended=None,
        recent=recent,
        **_kept(view, e),
    )


def on_answer(view: StreamView, e: Answer) -> StreamView:
    """An answer's end: the cache after it (questions and answers take cache room too)."""
    return replace(view, cache_tokens=int(e.stats.cache_tokens_end), kv_bytes=int(e.stats.kv_bytes))


def on_check(view: StreamView, e: Check) -> StreamView:
    """A yes/no check of one of the stream's watches: its latest p_yes."""
    name, p_yes = e.alert, float(e.p_yes)
    checks = dict(view.checks)
    checks[name] = p_yes
    return replace(view, checks=tuple(checks.items()))


def on_status(view: StreamView, e: Status) -> StreamView:
    message = e.message
    if e.kind is StatusKind.STREAM_WATCHING:
        source = message.removeprefix("watching ")
        return replace(
            view, state=StreamState.WATCHING, source=source, stream_ended=None, stream_time=0.0, lag_s=None, recent=()
        )
    if e.kind in (StatusKind.STREAM_STOPPED, StatusKind.STOPPED):
        state = StreamState.ENDED if view.state == StreamState.ENDED else StreamState.IDLE
        return replace(view, state=state, source=None, stream_ended=message)
    if e.kind is StatusKind.MEMORY_RESET:
        return replace(view, cache_tokens=0, kv_bytes=0, stream_time=0.0, recent=())
    if e.kind is StatusKind.STREAM_PLACED:
        return replace(view, host=e.host, waiting=None)
    if e.kind is StatusKind.STREAM_WAITING:
        return replace(view, host=None, waiting=message.removeprefix("waiting: "))
    return view


def on_capture(view: StreamView, e: CaptureChange) -> StreamView:
    state = e.state
    return replace(view, state=state) if state in STATES else view


def on_end(view: StreamView, why: str) -> StreamView:
    return replace(view, state=StreamState.ENDED, source=None, stream_ended=why)
