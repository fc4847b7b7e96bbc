"""Pure functions from a `Snapshot` (ui.state) to what the page's components show. No Gradio here.

Chat messages use Gradio's messages format: a list of {"role": "user" | "assistant", "content": markdown}.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import pandas as pd

from ui.state import LogLine, Snapshot, Turn

MIB = 1024 * 1024
X = "stream time (s)"
CACHE_SERIES = ("cache tokens", "budget", "tokens seen (what a full cache would hold)")
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
    bias: float
    memory_backend: str
    memory_label: str
    random_weights: bool = False  # --model tiny
    pool: int = 1


def format_stream_time(t: float | None) -> str:
    """16.0 s, 2:05, 1:02:05."""
    if t is None:
        return "-"
    if t < 60:
        return f"{t:.1f} s"
    minutes, seconds = divmod(int(round(t)), 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours}:{minutes:02d}:{seconds:02d}" if hours else f"{minutes}:{seconds:02d}"


def answer_footer(turn: Turn) -> str:
    """round 3 · t = 16.0 s · ttft 0.05 s · 12.3 tokens/s · cache 1900 → 1840 tokens"""
    parts = [f"round {turn.round}", f"t = {format_stream_time(turn.stream_time)}"]
    m = turn.metrics
    if "ttft_s" in m:
        parts.append(f"ttft {m['ttft_s']:.2f} s")
    if "decode_tokens_per_s" in m:
        parts.append(f"{m['decode_tokens_per_s']:.1f} tokens/s")
    if "cache_tokens_before" in m and "cache_tokens_after" in m:
        parts.append(f"cache {m['cache_tokens_before']} → {m['cache_tokens_after']} tokens")
    if m.get("recalled_tokens"):
        parts.append(f"recalled {m['recalled_tokens']} tokens ({m.get('recall_ms', 0):.0f} ms)")
    if m.get("cut_off"):
        parts.append("cut off: the assistant stopped")
    return " · ".join(parts)


def turn_messages(turn: Turn) -> list[dict]:
    question = f"*[auto]* {turn.question}" if turn.auto else turn.question
    if turn.error is not None:
        body = f"**Not answered:** {turn.error}" if turn.round is None else f"{turn.answer}\n\n**Failed:** {turn.error}"
    elif turn.queued:
        body = "*queued: answered after the questions before it*"
    elif not turn.done:
        body = (turn.answer or "*thinking*") + " ▍"
    else:
        body = (turn.answer.strip() or "*(empty answer)*") + f"\n\n*{answer_footer(turn)}*"
    return [{"role": "user", "content": question}, {"role": "assistant", "content": body}]


def chat_messages(snap: Snapshot, after_seq: int = 0) -> list[dict]:
    """The chat; turns up to `after_seq` are left out (a tab that cleared its chat)."""
    return [message for turn in snap.turns if turn.seq > after_seq for message in turn_messages(turn)]


def preview_caption(snap: Snapshot) -> str:
    if snap.preview is None:
        return "No frame yet: pick a source and press Start."
    return f"Latest sampled frame · t = {format_stream_time(snap.preview_time)} · clip {snap.preview_clip}"


def status_markdown(snap: Snapshot, standing_question: str, every_s: float) -> str:
    if snap.source is not None:
        state = f"**Watching** {snap.source} · t = {format_stream_time(snap.stream_time)}"
    elif snap.stream_ended is not None:
        state = f"**Not watching** ({snap.stream_ended}); questions are still answered from memory"
    else:
        state = "**Idle**: pick a source and press Start"
    cache = f"cache {snap.cache_tokens} / {snap.budget} tokens · {snap.clips} clips · {snap.dropped_clips} dropped"
    if snap.store_tokens:
        cache += (
            f"  \nhost store {snap.store_tokens} tokens · {snap.store_bytes / MIB:.1f} MiB · "
            f"holds the stream from t = {format_stream_time(snap.store_oldest_time)}"
        )
    standing = (
        f"standing question every {every_s:g} s: “{standing_question}”" if every_s > 0 else "no standing question"
    )
    return f"{state}  \n{cache}  \n{standing}"


def settings_markdown(info: PageInfo) -> str:
    line = (
        f"**Model** {info.model} ({info.family}, {info.device}, {info.dtype}) · **policy** {info.policy} · "
        f"**budget** {info.budget} tokens · **window** {info.window} · **bias** {info.bias:g} · **pool** {info.pool} · "
        f"**memory** {info.memory_label} [{info.memory_backend}]"
    )
    if info.random_weights:
        line += "  \n⚠ `tiny` has random weights: its answers are gibberish (the page, cache and timings are real)."
    return line


def log_markdown(lines: tuple[LogLine, ...], limit: int = 12) -> str:
    if not lines:
        return "*No activity yet.*"
    out = []
    for line in reversed(lines[-limit:]):
        stamp = time.strftime("%H:%M:%S", time.localtime(line.t_wall))
        mark = "⚠ " if line.kind == "error" else ""
        out.append(f"- `{stamp}` {mark}{line.message}")
    return "\n".join(out)


def cache_frame(snap: Snapshot) -> pd.DataFrame:
    """Long format for gr.LinePlot: one row per (stream time, series). Series are drawn in order of first
    appearance, so the cache tokens come last: on top of the budget line they sit on once full."""
    rows = []
    for p in snap.points:
        rows += [(p.t, p.budget, CACHE_SERIES[1]), (p.t, p.tokens_seen, CACHE_SERIES[2])]
        rows.append((p.t, p.cache_tokens, CACHE_SERIES[0]))
    return _frame(rows, "tokens")


def memory_frame(snap: Snapshot, label: str) -> pd.DataFrame:
    """Memory in MiB over stream time: `label` (device or process memory), the KV cache, a never-evicting one,
    and the host store when recall is on (flat device KV while the store fills to its bound)."""
    rows = []
    with_store = any(p.store_bytes for p in snap.points)
    for p in snap.points:
        rows += [(p.t, p.full_kv_bytes / MIB, KV_SERIES[1]), (p.t, p.kv_bytes / MIB, KV_SERIES[0])]
        if with_store:
            rows.append((p.t, p.store_bytes / MIB, KV_SERIES[2]))
        if p.memory_bytes is not None:
            rows.append((p.t, p.memory_bytes / MIB, label))
    return _frame(rows, "MiB")


def _frame(rows: list[tuple[float, float, str]], y: str) -> pd.DataFrame:
    """Typed columns even when empty: the plot takes an empty object column for a category axis and keeps it."""
    return pd.DataFrame(rows, columns=[X, y, "series"]).astype({X: "float64", y: "float64", "series": "string"})
