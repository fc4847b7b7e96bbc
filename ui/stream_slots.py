"""Room on the page for streams added while it runs. Gradio builds a layout once, so the page builds hidden
spare panels up front (up to MAX_STREAMS panels in all); the fast timer gives each added stream the next spare,
in the order the streams were added, and shows it. The same timer gives the stream selectors the new names;
the plot timer switches the plots to one line per stream (their axis, colours and titles, see `switch_plots`).

Each tab keeps what it has shown in its `seen` dict (the page's `gr.State`), so it is told once.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import gradio as gr

from ui import history, render
from ui.controls import ALL_STREAMS, MAX_STREAMS
from ui.state import Snapshot

PALETTE = ("#f97316", "#16a34a", "#9333ea", "#0891b2", "#db2777", "#ca8a04", "#4b5563", "#65a30d")
PANEL_KINDS = ("preview", "caption", "panel")
REMOVED = "**removed**"


def spare_count(streams: Sequence[str]) -> int:
    """How many spare panels a page built for `streams` has: room for MAX_STREAMS streams in all."""
    return max(MAX_STREAMS - len(streams), 0)


def spare_outputs(count: int) -> tuple[str, ...]:
    """The spares' output names: `column:#K` (shown or not) and `preview:#K`, `caption:#K`, `panel:#K`."""
    return tuple(f"{kind}:#{k}" for k in range(count) for kind in ("column", *PANEL_KINDS))


def build_spares(count: int) -> dict[str, gr.components.Component]:
    """`count` hidden panels (call inside the row of the streams' panels); {output name: component}."""
    components: dict[str, Any] = {}
    for k in range(count):
        with gr.Column(
            visible=False, min_width=280, elem_id=f"stream-slot-{k}", elem_classes=["stream-panel"]
        ) as column:
            components[f"column:#{k}"] = column
            components[f"preview:#{k}"] = gr.Image(
                label="stream", type="filepath", interactive=False, elem_id=f"preview-slot-{k}", height=220
            )
            components[f"caption:#{k}"] = gr.Markdown(elem_id=f"caption-slot-{k}")
            components[f"panel:#{k}"] = gr.Markdown(elem_id=f"status-slot-{k}")
    return components


def place_in_spares(snap: Snapshot, seen: dict, values: dict[str, Any], fixed: Sequence[str], count: int) -> None:
    """Moves the values of streams without a panel of their own (not in `fixed`) to the spares, in order; a spare
    that gets its stream is shown, labelled with its name. Changes `seen` and `values` in place."""
    added = [view.name for view in snap.streams if view.name not in fixed][:count]
    for k in range(len(added), count):  # a spare whose stream was removed: hidden again
        if seen.pop(f"slot:#{k}", None) is not None:
            values[f"column:#{k}"] = gr.update(visible=False)
    names = {view.name for view in snap.streams}
    for name in fixed:  # a stream of the start that was removed keeps its panel, marked so
        if name not in names and seen.get(f"panel:{name}") != REMOVED:
            seen[f"panel:{name}"] = values[f"panel:{name}"] = REMOVED
    for k, name in enumerate(added):
        for kind in PANEL_KINDS:
            if f"{kind}:{name}" in values:
                values[f"{kind}:#{k}"] = values.pop(f"{kind}:{name}")
        if seen.get(f"slot:#{k}") != name:
            seen[f"slot:#{k}"] = name
            values[f"column:#{k}"] = gr.update(visible=True)
            frame = values.get(f"preview:#{k}")
            values[f"preview:#{k}"] = gr.update(label=f"stream {name}", value=frame)


def selector_updates(snap: Snapshot, seen: dict, values: dict[str, Any]) -> None:
    """New choices for the stream selectors (the question's, the source buttons' and "Watch for"'s, shown from two
    streams on, and the History tab's) once the streams differ from `seen["names"]` (those the tab shows). Changes
    `seen` and `values` in place; `values` may name selectors the page does not have (they are not sent)."""
    names = [view.name for view in snap.streams]
    if seen.get("names") == names:
        return
    seen["names"] = names
    values["ask-stream"] = gr.update(choices=[ALL_STREAMS, *names], visible=len(names) > 1)
    values["source-stream"] = gr.update(choices=names, visible=len(names) > 1)
    values["history-stream"] = gr.update(choices=[history.ALL, *names])  # the History tab's (when it has one)
    values["day-stream"] = gr.update(choices=[history.ALL, *names])  # its Day view's
    values["recap-stream"] = gr.update(choices=[history.ALL, *names])  # its Recap view's
    values["watch-stream"] = gr.update(choices=[ALL_STREAMS, *names], visible=len(names) > 1)  # "Watch for"


def memory_colors(label: str, streams: Sequence[str]) -> dict[str, str]:
    """The memory plot's colours: the device/process memory, the KV cache (with several streams: the total
    and one per stream), the never-evicting estimate and the host store."""
    colors = {label: "#2563eb", render.KV_SERIES[1]: "#9ca3af", render.KV_SERIES[2]: "#16a34a"}
    if len(streams) <= 1:
        return {**colors, render.KV_SERIES[0]: "#f97316"}
    colors[render.TOTAL_KV] = "#dc2626"
    colors[render.KV_SERIES[2]] = "#111827"
    return colors | {render.kv_series(n): PALETTE[i % len(PALETTE)] for i, n in enumerate(streams)}


def cache_colors(streams: Sequence[str]) -> dict[str, str]:
    """The token plot's colours: budget, tokens seen, the cache (one per stream), and the visual tokens each clip
    brought and kept (a stream's kept line has its cache line's colour, far below it)."""
    colors = {render.CACHE_SERIES[1]: "#dc2626", render.CACHE_SERIES[2]: "#9ca3af"}
    if len(streams) <= 1:
        visual = {render.VISUAL_SERIES[0]: "#c4b5fd", render.VISUAL_SERIES[1]: "#7c3aed"}
        return {**colors, **visual, render.CACHE_SERIES[0]: "#2563eb"}
    per_stream = {}
    for i, n in enumerate(streams):
        per_stream[render.cache_series(n)] = per_stream[render.kept_series(n)] = PALETTE[i % len(PALETTE)]
    return colors | per_stream


def plot_props(memory_label: str, streams: Sequence[str]) -> tuple[dict[str, Any], dict[str, Any]]:
    """The memory and cache plots' axis, title and colours for these streams: (memory, cache)."""
    multi = len(streams) > 1
    x = render.x_axis(multi)
    memory = {
        "x": x,
        "x_title": x,
        "title": "KV cache: each stream and all (MiB)" if multi else f"Memory: {memory_label} and KV cache",
        "color_map": memory_colors(memory_label, streams),
    }
    cache = {
        "x": x,
        "x_title": x,
        "title": "KV-cache tokens" + (" per stream" if multi else ""),
        "color_map": cache_colors(streams),
    }
    return memory, cache


def switch_plots(snap: Snapshot, seen: dict, values: dict[str, Any], memory_label: str) -> dict:
    """Redraws the plots when their streams change: turns the plot timer's frames (`values`: {"memory": frame,
    "cache": frame}) into updates with the axis, colours and titles of the streams now; returns the new `seen`,
    changes `values` in place. `seen["drawn"]`: the stream names the tab's plots were built or last redrawn for,
    and the streams with points then (None: the tab has had no data yet; its first frame draws the plot).

    Gradio's plot fixes its series and axis type when its props change, from the data it holds at that moment,
    which can still be the previous frame; and a series that first appears later gets no line. So a change of
    the streams, or of which streams have points, takes two steps, each with new data: the new props with an
    empty x title, then the x title (a change that redraws the plot from the data the first step brought)."""
    if not values:
        return seen
    names = [view.name for view in snap.streams]
    now = {"names": names, "plotted": sorted({point.stream for point in snap.points})}
    drawn = seen["drawn"]
    if drawn["plotted"] is None and drawn["names"] == names:
        return {**seen, "drawn": now}  # the first data of the streams it was built for: Gradio draws it as it comes
    if drawn == now:
        return seen
    memory, cache = plot_props(memory_label, names)
    if seen.get("switching") != now:
        memory, cache = {**memory, "x_title": ""}, {**cache, "x_title": ""}
        seen = {**seen, "switching": now}
    else:
        seen = {**seen, "drawn": now, "switching": None}
    for key, props in (("memory", memory), ("cache", cache)):
        values[key] = gr.update(value=values[key], **props)
    return seen
