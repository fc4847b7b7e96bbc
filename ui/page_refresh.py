"""What the page's two timers send each open tab, from the shared `LiveState`, and their wiring.

A fast timer sends the chat, the previews, the status, the log and the alerts (answers appear as they are
generated); a one-second one the plots. Each tab remembers which versions it has shown (`gr.State`), so an
unchanged component is skipped instead of re-sent. `live_updates`, `plot_updates` and `clear_chat` are pure
functions of a snapshot and what the tab has seen; `wire_timers` connects them to the page's components.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import gradio as gr

from bus.desk import Schedule
from ui import alert_view, render, stream_slots
from ui.alerts import Alert
from ui.evidence import EvidenceThumbs
from ui.history import HistorySource
from ui.page_layout import Plots
from ui.preview_files import PreviewFiles
from ui.state import LiveState, Snapshot

FAST_REFRESH_S = 0.3
PLOT_REFRESH_S = 1.0
LIVE_OUTPUTS = ("chat", "preview", "caption", "status", "log", "banner", "alerts")
# the stream selectors, given the names of streams added later
SELECTORS = ("ask-stream", "source-stream", "history-stream", "day-stream", "recap-stream", "watch-stream")


def live_outputs(streams: tuple[str, ...]) -> tuple[str, ...]:
    """The fast timer's outputs: LIVE_OUTPUTS with one stream; with several, each stream's
    `preview:NAME`, `caption:NAME` and `panel:NAME` after the chat, status, log and alerts."""
    if len(streams) <= 1:
        return LIVE_OUTPUTS
    return (
        "chat",
        "status",
        "log",
        "banner",
        "alerts",
        *(f"{kind}:{name}" for name in streams for kind in ("preview", "caption", "panel")),
    )


Thumbs = Callable[[Sequence[Alert]], Mapping[str, "str | None"]]
EvidenceSources = Callable[[Snapshot], Mapping[int, render.Thumbs]]


def live_updates(
    snap: Snapshot,
    seen: dict,
    schedule: Schedule,
    thumbs: Thumbs | None = None,
    evidence: EvidenceSources | None = None,
    first_shown: bool | None = None,
) -> tuple[dict, dict[str, Any]]:
    """What the fast timer must send to a tab that has shown `seen`: (new seen, {output name: value}).

    first_shown: the page shows the first stream in its one-stream preview (`preview`, `caption`, `status`),
    the others (added later) in panels; None: when there is one stream. Panels are `preview:NAME`,
    `caption:NAME`, `panel:NAME`.

    Outputs missing from the dict are unchanged for that tab. Previews are frames ([H, W, 3] uint8 or None).
    The alert banner and list are HTML; `thumbs` gives the list's snapshot thumbnails (None: none shown);
    `evidence` the thumbnails under the answers, by turn seq (None: none).
    """
    seen = dict(seen)
    out: dict[str, Any] = {}
    if seen.get("chat") != snap.chat_version:
        seen["chat"] = snap.chat_version
        out["chat"] = render.chat_messages(snap, seen.get("cleared", 0), evidence(snap) if evidence else None)
    first_shown = not snap.multi if first_shown is None else first_shown
    if first_shown and seen.get("preview") != snap.default.preview_version:
        seen["preview"] = snap.default.preview_version
        out["preview"] = snap.default.preview
        out["caption"] = render.preview_caption(snap.default)
    for view in snap.streams[1:] if first_shown else snap.streams:
        if seen.get(f"preview:{view.name}") != view.preview_version:
            seen[f"preview:{view.name}"] = view.preview_version
            out[f"preview:{view.name}"] = view.preview
            out[f"caption:{view.name}"] = render.preview_caption(view)
        panel = render.stream_status(view)
        if seen.get(f"panel:{view.name}") != panel:
            seen[f"panel:{view.name}"] = out[f"panel:{view.name}"] = panel
    status = render.status_markdown(snap, schedule.question, schedule.every_s, first_shown)
    if seen.get("status") != status:
        seen["status"] = status
        out["status"] = status
    if seen.get("log") != snap.log_version:
        seen["log"] = snap.log_version
        out["log"] = render.log_markdown(snap.log)
    if seen.get("alerts") != snap.alerts_version:
        seen["alerts"] = snap.alerts_version
        out["banner"] = alert_view.banner_html(snap.active_alerts)
        out["alerts"] = alert_view.alerts_html(snap.alerts, thumbs(snap.alerts) if thumbs else None)
    return seen, out


def clear_chat(snap: Snapshot, seen: dict) -> dict:
    """The tab's Clear button: this tab hides the turns so far (the chat is shared; others keep theirs)."""
    return {**seen, "cleared": max((t.seq for t in snap.turns), default=0), "chat": None}


def plot_updates(snap: Snapshot, seen: int | None, memory_label: str) -> tuple[int, dict[str, Any]]:
    """What the plot timer must send: (new seen version, {"cache": frame, "memory": frame} or {}).

    Nothing until there is a point: the plot fixes its series (colours, legend) from the first value it gets.
    """
    if seen == snap.plot_version or not snap.points:
        return seen, {}
    return snap.plot_version, {"cache": render.cache_frame(snap), "memory": render.memory_frame(snap, memory_label)}


def _as_outputs(names: tuple[str, ...], values: dict[str, Any]) -> list[Any]:
    return [values[name] if name in values else gr.skip() for name in names]


def wire_timers(
    live: LiveState,
    streams: tuple[str, ...],
    shown: Mapping[str, gr.components.Component],
    plots: Plots,
    *,
    schedule: Schedule,
    previews: PreviewFiles,
    memory_label: str,
    history: HistorySource | None,
) -> None:
    """The two timers and the chat's Clear button, for a page built for `streams` (call inside its `gr.Blocks`).

    shown: the fast timer's components by output name (`live_outputs`, the spares', the stream selectors);
    previews: where preview frames become files; history: the timeline, for the thumbnails under the answers
    (None: none)."""
    multi = len(streams) > 1
    spares = stream_slots.spare_count(streams)
    thumbs = alert_view.Thumbnails()
    evidence = EvidenceThumbs(history.thumbnail if history is not None else None)
    selectors = tuple(name for name in SELECTORS if name in shown)
    outputs = (*live_outputs(streams), *stream_slots.spare_outputs(spares), *selectors)
    seen_live = gr.State({"names": list(streams)})
    seen_plot = gr.State({"version": None, "drawn": {"names": list(streams), "plotted": None}})
    fast = gr.Timer(FAST_REFRESH_S)
    slow = gr.Timer(PLOT_REFRESH_S)

    def refresh_live(seen: dict) -> list[Any]:
        snap = live.snapshot()
        new_seen, values = live_updates(
            snap, seen, schedule, thumbs.for_alerts, evidence.for_snapshot, first_shown=not multi
        )
        for key in [k for k in values if k.startswith("preview")]:
            if values[key] is not None:
                view = snap.stream(key.split(":", 1)[1]) if ":" in key else snap.default
                values[key] = previews.path_for(view.preview_version, values[key])
        stream_slots.place_in_spares(snap, new_seen, values, streams, spares)
        stream_slots.selector_updates(snap, new_seen, values)
        return [new_seen, *_as_outputs(outputs, values)]

    def refresh_plots(seen: dict) -> list[Any]:
        snap = live.snapshot()
        version, values = plot_updates(snap, seen["version"], memory_label)
        seen = stream_slots.switch_plots(snap, seen, values, memory_label)  # once streams were added
        return [{**seen, "version": version}, *_as_outputs(("memory", "cache"), values)]

    tick = {"concurrency_limit": None, "show_progress": "hidden", "api_visibility": "private"}
    fast.tick(refresh_live, [seen_live], [seen_live, *(shown[k] for k in outputs)], **tick)
    slow.tick(refresh_plots, [seen_plot], [seen_plot, plots.memory, plots.cache], **tick)

    chat = shown["chat"]
    chat.clear(lambda seen: clear_chat(live.snapshot(), seen), [seen_live], [seen_live], api_visibility="private")
