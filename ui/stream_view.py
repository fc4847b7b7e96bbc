"""What the page shows of one watched stream, and how each of that stream's events changes it. Pure functions
of (view, event) -> view: no Gradio, no locks (ui.state holds the lock and the collection of views)."""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

STATES = ("idle", "watching", "reconnecting", "ended")
RECENT_CLIPS = 8  # clip previews kept per stream, for the thumbnails of the evidence under answers


@dataclass(frozen=True, eq=False)
class StreamView:
    """One stream's panel. state: one of STATES. preview_version: the page-wide preview counter at this stream's
    latest frame (unique across streams, so one preview file per frame). lag_s: seconds behind real time at the
    latest clip. Sizes in bytes, counts in tokens, times in seconds of this stream."""

    name: str
    state: str = "idle"
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
    cache_tokens: int = 0
    budget: int = 0
    kv_bytes: int = 0
    store_tokens: int = 0
    store_bytes: int = 0
    store_oldest_time: float | None = None
    visual_tokens: int | None = None  # the latest clip's visual tokens in full; None: the events do not say
    visual_tokens_kept: int | None = None  # ... and how many of them entered the cache (unchanged ones dropped)
    keyframe: bool = False  # the latest clip was kept whole (a key frame)
    visual_tokens_total: int = 0  # since the page started, over the clips that said both
    visual_tokens_kept_total: int = 0
    checks: tuple[tuple[str, float], ...] = ()  # each watch's latest p_yes: (alert name, p_yes), first checked first
    recent: tuple[
        tuple[float, float, np.ndarray], ...
    ] = ()  # the latest clips' (t_start, t_end, preview), oldest first


def _kept(view: StreamView, e: dict) -> dict:
    """The visual-token fields of `view` after clip event `e` (unchanged when `e` lacks them: dropping off in an
    older assistant)."""
    full, kept = e.get("visual_tokens"), e.get("visual_tokens_kept")
    if full is None or kept is None:
        return {}
    return dict(
        visual_tokens=int(full),
        visual_tokens_kept=int(kept),
        keyframe=bool(e.get("keyframe", False)),
        visual_tokens_total=view.visual_tokens_total + int(full),
        visual_tokens_kept_total=view.visual_tokens_kept_total + int(kept),
    )


def on_clip(view: StreamView, e: dict, preview_version: int) -> StreamView:
    preview = e.get("preview")
    has_frame = isinstance(preview, np.ndarray)
    t_end = float(e["stream_time"])
    recent = (
        (*view.recent, (float(e.get("t_start", t_end)), t_end, preview))[-RECENT_CLIPS:] if has_frame else view.recent
    )
    return replace(
        view,
        state="watching",
        preview=preview if has_frame else view.preview,
        preview_version=preview_version if has_frame else view.preview_version,
        preview_time=float(e["stream_time"]),
        preview_clip=int(e.get("index", 0)),
        stream_time=float(e["stream_time"]),
        lag_s=float(e["lag_s"]) if "lag_s" in e else view.lag_s,
        clips=view.clips + 1,
        dropped_clips=int(e.get("dropped_clips", 0)),
        cache_tokens=int(e["cache_tokens"]),
        budget=int(e.get("budget", view.budget)),
        kv_bytes=int(e.get("kv_bytes", view.kv_bytes)),
        store_tokens=int(e.get("store_tokens", 0)),
        store_bytes=int(e.get("store_bytes", 0)),
        store_oldest_time=e.get("store_oldest_time"),
        stream_ended=None,
        recent=recent,
        **_kept(view, e),
    )


def on_answer(view: StreamView, e: dict) -> StreamView:
    """An answer's end: the cache after it (questions and answers take cache room too)."""
    if "cache_tokens_end" not in e:
        return view
    return replace(view, cache_tokens=int(e["cache_tokens_end"]), kv_bytes=int(e.get("kv_bytes", view.kv_bytes)))


def on_check(view: StreamView, e: dict) -> StreamView:
    """A yes/no check of one of the stream's watches: its latest p_yes."""
    name, p_yes = str(e.get("alert", "")), float(e.get("p_yes", 0.0))
    checks = dict(view.checks)
    checks[name] = p_yes
    return replace(view, checks=tuple(checks.items()))


def on_status(view: StreamView, message: str) -> StreamView:
    if message.startswith("watching "):
        source = message.removeprefix("watching ")
        return replace(view, state="watching", source=source, stream_ended=None, stream_time=0.0, lag_s=None, recent=())
    if message in ("stream stopped", "assistant stopped"):
        return replace(view, state="idle" if view.state != "ended" else "ended", source=None, stream_ended=message)
    if message.startswith("memory reset"):
        return replace(view, cache_tokens=0, kv_bytes=0, stream_time=0.0, recent=())
    return view


def on_capture(view: StreamView, e: dict) -> StreamView:
    state = e.get("state")
    return replace(view, state=state) if state in STATES else view


def on_end(view: StreamView, why: str) -> StreamView:
    return replace(view, state="ended", source=None, stream_ended=why)
