"""Pure functions from a `Snapshot` (ui.state) to what the page's components show. No Gradio here.

Chat messages use Gradio's messages format: a list of {"role": "user" | "assistant", "content": markdown}.
Text from people and from the model (questions, answers, sources, log lines) goes through `plain_text`: it is
shown as typed, never as markdown (no remote image, no live link).
"""

from __future__ import annotations

import html
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import pandas as pd

from bus import StreamState
from ui.evidence import THUMB_WIDTH, seen_at
from ui.plain_text import plain_text
from ui.state import LogLine, Snapshot, Turn
from ui.stream_view import StreamView
from ui.upload_names import hide_upload_folder

MIB = 1024 * 1024
X = "stream time (s)"
X_RUN = "run time (s)"  # the shared time axis of several streams
TOTAL_KV = "KV cache, all streams"
CACHE_SERIES = ("cache tokens", "budget", "tokens seen (what a full cache would hold)")
VISUAL_SERIES = ("visual tokens per clip", "visual tokens kept per clip")
KV_SERIES = ("KV cache", "KV cache without eviction (estimate)", "host store (tier 2)")


@dataclass(frozen=True)
class PageInfo:
    """What does not change while the page runs: the model and the cache settings."""

    model: str
    family: str
    device: str
    dtype: str
    policy: str
    budget: int
    window: int
    memory_backend: str
    memory_label: str
    random_weights: bool = False  # --model tiny
    demo_weights: bool = False  # --model demo
    policy_settings: str = ""  # the policy's own settings, e.g. "bias 0.001, pool 8 (span)"


def format_stream_time(t: float | None) -> str:
    """16.0 s, 2:05, 1:02:05."""
    if t is None:
        return "-"
    if t < 60:
        return f"{t:.1f} s"
    minutes, seconds = divmod(int(round(t)), 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours}:{minutes:02d}:{seconds:02d}" if hours else f"{minutes}:{seconds:02d}"


def x_axis(multi: bool) -> str:
    """The plots' time axis: a stream's own time with one stream, seconds since the first point with several."""
    return X_RUN if multi else X


def kv_series(stream: str) -> str:
    return f"KV cache {stream}"


def cache_series(stream: str) -> str:
    return f"{stream}: cache tokens"


def kept_series(stream: str) -> str:
    return f"{stream}: visual tokens kept per clip"


def answer_footer(turn: Turn, label: bool = False) -> str:
    """round 3 · t = 16.0 s · ttft 0.05 s · 12.3 tokens/s · cache 1900 → 1840 tokens (label: `stream a · ` first)"""
    parts = [f"round {turn.round}", f"t = {format_stream_time(turn.stream_time)}"]
    if label:
        parts.insert(0, f"stream {turn.stream}")
    m = turn.stats
    if m is None:  # not answered yet
        return " · ".join(parts)
    parts.append(f"ttft {m.ttft_s:.2f} s")
    parts.append(f"{m.decode_tokens_per_s:.1f} tokens/s")
    parts.append(f"cache {m.cache_tokens_before} → {m.cache_tokens_after} tokens")
    if m.recalled_tokens:
        parts.append(f"recalled {m.recalled_tokens} tokens ({m.recall_ms:.0f} ms)")
    if m.cut_off:
        parts.append("cut off: the assistant stopped")
    return " · ".join(parts)


Thumbs = Sequence[tuple[str, str]]  # (image source, span label)


def evidence_markdown(turn: Turn, thumbs: Thumbs = ()) -> str:
    """Under an answer: `seen at 00:12:40-00:12:44 (recall), ...` and its thumbnails (inline images); empty
    without evidence."""
    line = seen_at(turn.evidence)
    if not line:
        return ""
    images = "".join(
        f'<img class="evidence-thumb" src="{src}" alt="{html.escape(label)}" title="{html.escape(label)}" '
        f'width="{THUMB_WIDTH}" style="display:inline-block;width:{THUMB_WIDTH}px;height:auto;margin:2px 4px 0 0">'
        for src, label in thumbs
    )
    return f"\n\n*{line}*" + (f"\n\n{images}" if images else "")


def turn_messages(turn: Turn, label: bool = False, thumbs: Thumbs = ()) -> list[dict]:
    """A turn as chat messages; `label`: name its stream (a page with several streams); `thumbs`: its evidence's
    thumbnails."""
    question = f"*[auto]* {plain_text(turn.question)}" if turn.auto else plain_text(turn.question)
    if label:
        question = f"**[{turn.stream}]** {question}"
    if turn.error is not None:
        error = plain_text(turn.error)
        if turn.round is None:
            body = f"**Not answered:** {error}"
        else:
            body = f"{plain_text(turn.answer)}\n\n**Failed:** {error}"
    elif turn.queued:
        body = "*queued: answered after the questions before it*"
    elif not turn.done:
        body = (plain_text(turn.answer) or "*thinking*") + " ▍"
    else:
        body = (plain_text(turn.answer.strip()) or "*(empty answer)*") + evidence_markdown(turn, thumbs)
        body += f"\n\n*{answer_footer(turn, label)}*"
    return [{"role": "user", "content": question}, {"role": "assistant", "content": body}]


def chat_messages(snap: Snapshot, after_seq: int = 0, thumbs: Mapping[int, Thumbs] | None = None) -> list[dict]:
    """The chat; turns up to `after_seq` are left out (a tab that cleared its chat). `thumbs`: evidence
    thumbnails by turn seq."""
    label, thumbs = snap.multi, thumbs or {}
    return [
        message
        for turn in snap.turns
        if turn.seq > after_seq
        for message in turn_messages(turn, label, thumbs.get(turn.seq, ()))
    ]


def preview_caption(view: StreamView | Snapshot) -> str:
    """Under a stream's frame (a `Snapshot`: its first stream's)."""
    if view.preview is None:
        return "No frame yet: pick a source and press Start."
    return f"Latest sampled frame · t = {format_stream_time(view.preview_time)} · clip {view.preview_clip}"


def stream_status(view: StreamView) -> str:
    """A stream's state, time, lag and cache: what its panel says under the frame."""
    t = format_stream_time(view.stream_time)
    lag = "" if view.lag_s is None else f" · lag {view.lag_s:.1f} s"
    source = plain_text(hide_upload_folder(view.source or ""))
    ended = plain_text(hide_upload_folder(view.stream_ended or ""))
    if view.state == StreamState.RECONNECTING:
        state = f"**Reconnecting** {source} · t = {t}: the source is down, retrying"
    elif view.source is not None:
        state = f"**Watching** {source} · t = {t}{lag}"
    elif view.state == StreamState.ENDED:
        state = f"**Ended** ({ended}); questions are still answered from memory"
    elif view.stream_ended is not None:
        state = f"**Not watching** ({ended}); questions are still answered from memory"
    else:
        state = "**Idle**: pick a source and press Start"
    cache = (
        f"cache {view.cache_tokens} / {view.budget} tokens · KV {view.kv_bytes / MIB:.1f} MiB · "
        f"{view.clips} clips · {view.dropped_clips} dropped"
    )
    if view.clip.store_tokens:
        cache += (
            f"  \nhost store {view.clip.store_tokens} tokens · {view.clip.store_bytes / MIB:.1f} MiB · "
            f"holds the stream from t = {format_stream_time(view.clip.store_oldest_time)}"
        )
    kept = kept_line(view)
    if kept:
        cache += f"  \n{kept}"
    watches = watches_line(view)
    placement = placement_line(view)
    return (f"{placement}  \n" if placement else "") + f"{state}  \n{cache}" + (f"  \n{watches}" if watches else "")


def placement_line(view: StreamView) -> str:
    """The fleet (--ray): `on host NAME`, or `no host now: why`; empty in one process (nothing said)."""
    if view.host is not None:
        return f"on host **{plain_text(view.host)}**"
    if view.waiting is not None:
        return f"**no host now**: {plain_text(view.waiting)}"
    return ""


def kept_line(view: StreamView) -> str:
    """`visual tokens kept: 12% of the last clip (61/512) · 9% since start`: what dropping unchanged tokens
    saves on this stream; empty when the clip events do not say (dropping off in an older assistant)."""
    full, kept = view.visual_clip.visual_tokens, view.visual_clip.visual_tokens_kept
    if full is None or kept is None:
        return ""
    last = _percent(kept, full)
    key = ", key frame" if view.visual_clip.keyframe else ""
    total = _percent(view.visual_tokens_kept_total, view.visual_tokens_total)
    return f"visual tokens kept: {last} of the last clip ({kept}/{full}{key}) · {total} since start"


def _percent(part: int, whole: int) -> str:
    return f"{100 * part / whole:.0f}%" if whole else "-"


def watches_line(view: StreamView) -> str:
    """`watches: person 0.83 · car 0.12`: each watch's latest p_yes on this stream; empty before a check."""
    if not view.checks:
        return ""
    return "watches: " + " · ".join(f"{name} {p_yes:.2f}" for name, p_yes in view.checks)


def standing_line(standing_question: str, every_s: float, stream: str | None = None) -> str:
    where = f" ({stream})" if stream else ""
    if every_s <= 0:
        return f"no standing question{where}"
    return f"standing question{where} every {every_s:g} s: “{plain_text(standing_question)}”"


def status_markdown(snap: Snapshot, standing_question: str, every_s: float, first_shown: bool = False) -> str:
    """The status block: the stream's with one stream; the streams' summary with several (each has its panel).
    first_shown: the page shows the first stream here, not in a panel (a one-stream page with streams added):
    its status, then the summary."""
    if not snap.multi:
        return f"{stream_status(snap.default)}  \n{standing_line(standing_question, every_s)}"
    first = f"{stream_status(snap.default)}  \n" if first_shown else ""
    states = " · ".join(f"{v.name}: {v.state}" + (f" on {plain_text(v.host)}" if v.host else "") for v in snap.streams)
    total = f"{len(snap.streams)} streams ({states}) · KV cache, all streams: {snap.total_kv_bytes / MIB:.1f} MiB"
    memory = next((p.memory_bytes for p in reversed(snap.points) if p.memory_bytes is not None), None)
    if memory is not None:
        total += f" · {snap.memory_label}: {memory / MIB:.0f} MiB"
    return f"{first}{total}  \n{standing_line(standing_question, every_s, snap.default.name)}"


def settings_markdown(info: PageInfo) -> str:
    line = (
        f"**Model** {info.model} ({info.family}, {info.device}, {info.dtype}) · **policy** {info.policy}"
        + (f" ({info.policy_settings})" if info.policy_settings else "")
        + f" · **budget** {info.budget} tokens · **window** {info.window} · "
        f"**memory** {info.memory_label} [{info.memory_backend}]"
    )
    if info.random_weights:
        line += "  \n⚠ `tiny` has random weights: its answers are gibberish (the page, cache and timings are real)."
    if info.demo_weights:
        line += (
            "  \nⓘ `demo` was trained here on generated scenes only (shapes and a walking figure on five backgrounds): "
            "it names what the demo video shows and says nothing true about a real camera."
        )
    return line


def log_markdown(lines: tuple[LogLine, ...], limit: int = 12) -> str:
    if not lines:
        return "*No activity yet.*"
    out = []
    for line in reversed(lines[-limit:]):
        stamp = time.strftime("%H:%M:%S", time.localtime(line.t_wall))
        mark = {"error": "⚠ ", "alert": "● "}.get(line.kind, "")
        out.append(f"- `{stamp}` {mark}{plain_text(hide_upload_folder(line.message))}")
    return "\n".join(out)


def cache_frame(snap: Snapshot) -> pd.DataFrame:
    """Long format for gr.LinePlot: one row per (stream time, series). Series are drawn in order of first
    appearance, so the cache tokens come last: on top of the budget line they sit on once full.
    With several streams: a cache line per stream and one budget line, over run time.
    When the clip events say how many visual tokens each clip kept (dropping unchanged ones): a line of them
    (per stream; with one stream also the clip's visual tokens in full)."""
    if snap.multi:
        rows = []
        for p in snap.points:
            rows += [(p.t_run, p.budget, CACHE_SERIES[1]), (p.t_run, p.cache_tokens, cache_series(p.stream))]
            if p.visual_tokens_kept is not None:
                rows.append((p.t_run, p.visual_tokens_kept, kept_series(p.stream)))
        return _frame(rows, "tokens", X_RUN)
    rows = []
    for p in snap.points:
        rows += [(p.t, p.budget, CACHE_SERIES[1]), (p.t, p.tokens_seen, CACHE_SERIES[2])]
        if p.visual_tokens_kept is not None:  # what each clip brought, and what of it entered the cache
            rows += [(p.t, p.visual_tokens, VISUAL_SERIES[0]), (p.t, p.visual_tokens_kept, VISUAL_SERIES[1])]
        rows.append((p.t, p.cache_tokens, CACHE_SERIES[0]))
    return _frame(rows, "tokens")


def memory_frame(snap: Snapshot, label: str) -> pd.DataFrame:
    """Memory in MiB over stream time: `label` (device or process memory), the KV cache, a never-evicting one,
    and the host store when recall is on (flat device KV while the store fills to its bound).
    With several streams, over run time: each stream's KV cache, all of them together, the stores together;
    the process (or device) memory, hundreds of times larger, would flatten them: it is in the status line."""
    if snap.multi:
        return _memory_frame_multi(snap)
    rows = []
    with_store = any(p.store_bytes for p in snap.points)
    for p in snap.points:
        rows += [(p.t, p.full_kv_bytes / MIB, KV_SERIES[1]), (p.t, p.kv_bytes / MIB, KV_SERIES[0])]
        if with_store:
            rows.append((p.t, p.store_bytes / MIB, KV_SERIES[2]))
        if p.memory_bytes is not None:
            rows.append((p.t, p.memory_bytes / MIB, label))
    return _frame(rows, "MiB")


def _memory_frame_multi(snap: Snapshot) -> pd.DataFrame:
    rows = []
    with_store = any(p.total_store_bytes for p in snap.points)
    for p in snap.points:
        rows += [(p.t_run, p.total_kv_bytes / MIB, TOTAL_KV), (p.t_run, p.kv_bytes / MIB, kv_series(p.stream))]
        if with_store:
            rows.append((p.t_run, p.total_store_bytes / MIB, KV_SERIES[2]))
    return _frame(rows, "MiB", X_RUN)


def _frame(rows: list[tuple[float, float, str]], y: str, x: str = X) -> pd.DataFrame:
    """Typed columns even when empty: the plot takes an empty object column for a category axis and keeps it."""
    return pd.DataFrame(rows, columns=[x, y, "series"]).astype({x: "float64", y: "float64", "series": "string"})
