"""The Gradio page: layout, and the glue from components to `Controls` (commands) and `LiveState` (display).

Two timers refresh every open tab from the shared `LiveState`: a fast one (chat, preview, status: answers
appear as they are generated) and a one-second one (plots). Each tab remembers which versions it has shown
(`gr.State`), so an unchanged component is skipped instead of re-sent.

With several streams, each has a panel (frame, caption, status) above the controls; the chat names each
turn's stream and a selector sends a question to one stream or to all; the source buttons act on the stream
chosen in theirs.

The page on the head of a fleet (`fleet=True`) leaves out what the fleet cannot do, each stream's cache living on
its host: Start (a new source in place), Stop, Reset memory and the standing question's editor; and it adds
network streams only, so its source is the URL box alone (no file upload, no camera). Adding and removing streams
and asking questions stay.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import gradio as gr
from gradio.utils import get_upload_folder

from ui import alert_view, history_tab, render, stream_slots
from ui.alerts import MAX_ALERTS, Alert
from ui.controls import ALL_STREAMS, MAX_STREAMS, SOURCE_KINDS, VIDEO_EXTENSIONS, Controls, Feedback, Schedule
from ui.evidence import EvidenceThumbs
from ui.history import HistorySource
from ui.plain_text import plain_text
from ui.preview_files import PreviewFiles
from ui.state import LiveState, Snapshot

FAST_REFRESH_S = 0.3
PLOT_REFRESH_S = 1.0
LIVE_OUTPUTS = ("chat", "preview", "caption", "status", "log", "banner", "alerts")


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


def preview_folder() -> Path:
    """Where preview frames go: inside Gradio's file cache (so they are served without a copy)."""
    return Path(get_upload_folder()) / "edge-assistant-previews"


def feedback_markdown(feedback: Feedback) -> str:
    """The clicking tab's message (plain text: it may hold what was typed); a refusal also pops up as a warning."""
    if feedback.ok:
        return plain_text(feedback.message)
    gr.Warning(feedback.message)
    return f"⚠ {plain_text(feedback.message)}"


def _as_outputs(names: tuple[str, ...], values: dict[str, Any]) -> list[Any]:
    return [values[name] if name in values else gr.skip() for name in names]


def _stream_panels(live: LiveState, streams: tuple[str, ...], spares: int) -> dict[str, gr.components.Component]:
    """One column per stream: its latest frame, caption and status; then `spares` hidden ones for streams added
    later (ui.stream_slots); {output name: component}."""
    components: dict[str, gr.components.Component] = {}
    with gr.Row(equal_height=False):
        for name in streams:
            view = live.snapshot().stream(name)
            with gr.Column(min_width=280, elem_id=f"stream-{name}", elem_classes=["stream-panel"]):
                components[f"preview:{name}"] = gr.Image(
                    label=f"stream {name}", type="filepath", interactive=False, elem_id=f"preview-{name}", height=220
                )
                components[f"caption:{name}"] = gr.Markdown(render.preview_caption(view), elem_id=f"caption-{name}")
                components[f"panel:{name}"] = gr.Markdown(render.stream_status(view), elem_id=f"status-{name}")
        components |= stream_slots.build_spares(spares)  # hidden: they take no room until a stream is added
    return components


def build_page(
    live: LiveState,
    controls: Controls,
    info: render.PageInfo,
    schedule: Schedule,
    previews: PreviewFiles,
    initial_source: str = "",
    history: HistorySource | None = None,
    fleet: bool = False,
) -> gr.Blocks:
    """The whole page, for the streams `live` was made with. `previews` holds the preview frames as files (see
    `preview_folder`); `initial_source` fills the path box (the first stream's source, if given); `history`
    searches the timeline (None: the timeline is off; the History tab says so); `fleet`: the page on a fleet's
    head, without Start, Stop, Reset memory, the standing question's editor and the file and camera sources (the
    module's docstring)."""
    streams = tuple(view.name for view in live.snapshot().streams)
    multi = len(streams) > 1
    spares = max(MAX_STREAMS - len(streams), 0)
    memory_props, cache_props = stream_slots.plot_props(info.memory_label, streams)
    live_components: dict[str, gr.components.Component] = {}
    thumbs = alert_view.Thumbnails()
    evidence = EvidenceThumbs(history.thumbnail if history is not None else None)
    with gr.Blocks(title="Edge streaming video assistant", analytics_enabled=False) as page:
        gr.Markdown("## Edge streaming video assistant")
        live_components["banner"] = gr.HTML(alert_view.banner_html(()), elem_id="alert-banner")
        gr.Markdown(render.settings_markdown(info), elem_id="settings")
        with gr.Tabs(elem_id="tabs"):
            with gr.Tab("Live", elem_id="live-tab"):
                if multi:
                    live_components["status"] = gr.Markdown(elem_id="status")
                live_components |= _stream_panels(live, streams if multi else (), spares)
                with gr.Row():
                    with gr.Column(scale=1):
                        if not multi:
                            live_components["preview"] = gr.Image(
                                label="Live preview", type="filepath", interactive=False, elem_id="preview", height=300
                            )
                            live_components["caption"] = gr.Markdown(
                                render.preview_caption(live.snapshot()), elem_id="preview-caption"
                            )
                            live_components["status"] = gr.Markdown(elem_id="status")
                        with gr.Group():
                            source_stream = gr.Dropdown(
                                list(streams),
                                value=streams[0],
                                label="Stream to remove" if fleet else "Stream the source buttons act on",
                                visible=multi,
                                elem_id="source-stream",
                            )
                            # a fleet's page adds network streams only: the URL box alone (FleetCommands.add_stream)
                            kind = gr.Radio(
                                list(SOURCE_KINDS),
                                value="path or URL" if initial_source or fleet else "file upload",
                                label="Source",
                                visible=not fleet,
                                elem_id="source-kind",
                            )
                            upload = gr.File(
                                label="Video file",
                                file_types=list(VIDEO_EXTENSIONS),
                                type="filepath",
                                height=120,
                                visible=not fleet,
                                elem_id="upload",
                            )
                            location = gr.Textbox(
                                value=initial_source,
                                label="Stream URL (rtsp, http or https)" if fleet else "Path or URL",
                                placeholder=(
                                    "rtsp://camera/stream, https://host/live.m3u8"
                                    if fleet
                                    else "/path/to/video.mp4, rtsp://camera/stream, https://host/clip.mp4"
                                ),
                                elem_id="location",
                            )
                            camera = gr.Number(
                                value=0,
                                label="Camera index",
                                precision=0,
                                minimum=0,
                                visible=not fleet,
                                elem_id="camera",
                            )
                        with gr.Row():
                            if not fleet:
                                start = gr.Button("Start", variant="primary", elem_id="start")
                                stop = gr.Button("Stop", elem_id="stop")
                                reset = gr.Button("Reset memory", elem_id="reset")
                            remove = gr.Button("Remove stream", elem_id="remove-stream")
                        source_msg = gr.Markdown(elem_id="source-msg")
                        with gr.Row():
                            new_name = gr.Textbox(
                                label=f"Add a stream watching the source above (at most {MAX_STREAMS} streams)",
                                placeholder="its name, e.g. door",
                                scale=3,
                                elem_id="new-stream-name",
                            )
                            add = gr.Button("Add stream", scale=1, elem_id="add-stream")
                        add_msg = gr.Markdown(elem_id="add-stream-msg")
                    with gr.Column(scale=1):
                        live_components["chat"] = chat = gr.Chatbot(
                            label="Questions and answers",
                            height=460,
                            elem_id="chat",
                            buttons=["copy"],
                            latex_delimiters=[],  # people's and the model's text is plain (ui.plain_text)
                        )
                        with gr.Row():
                            ask_stream = gr.Dropdown(
                                [ALL_STREAMS, *streams],
                                value=ALL_STREAMS if multi else streams[0],
                                show_label=False,
                                visible=multi,
                                scale=2,
                                min_width=150,
                                elem_id="ask-stream",
                            )
                            ask_box = gr.Textbox(
                                placeholder="Ask about the stream, then Enter",
                                show_label=False,
                                scale=4,
                                elem_id="ask-box",
                            )
                            ask = gr.Button("Ask", scale=1, elem_id="ask")
                        ask_msg = gr.Markdown(elem_id="ask-msg")
                        if not fleet:  # the hosts hold each stream's own copy
                            with gr.Row():
                                standing = gr.Textbox(
                                    value=schedule.question,
                                    label=f"Standing question ({streams[0]})" if multi else "Standing question",
                                    scale=3,
                                    elem_id="standing",
                                )
                                every = gr.Number(
                                    value=schedule.every_s,
                                    label="every (s of stream, 0 = never)",
                                    minimum=0,
                                    scale=1,
                                    elem_id="every",
                                )
                                apply = gr.Button("Apply", scale=1, elem_id="apply")
                            standing_msg = gr.Markdown(elem_id="standing-msg")
                with gr.Accordion(
                    f"Alerts (the latest {MAX_ALERTS}, newest first)", open=True, elem_id="alerts-section"
                ):
                    live_components["alerts"] = gr.HTML(
                        alert_view.alerts_html(()), css_template=alert_view.TABLE_CSS, elem_id="alerts-list"
                    )
                with gr.Row():
                    memory_plot = gr.LinePlot(
                        y="MiB", color="series", y_title="MiB", height=280, elem_id="memory-plot", **memory_props
                    )
                    cache_plot = gr.LinePlot(
                        y="tokens", color="series", y_title="tokens", height=280, elem_id="cache-plot", **cache_props
                    )
                with gr.Accordion("Activity", open=True):
                    live_components["log"] = gr.Markdown(elem_id="log")
            with gr.Tab("History", elem_id="history-tab"):
                history_stream = history_tab.build(history, streams)

        live_components |= {"ask-stream": ask_stream, "source-stream": source_stream}
        selectors = ("ask-stream", "source-stream")
        if history_stream is not None:
            live_components["history-stream"] = history_stream
            selectors += ("history-stream",)
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
            version, values = plot_updates(snap, seen["version"], info.memory_label)
            seen = stream_slots.switch_plots(snap, seen, values, info.memory_label)  # once streams were added
            return [{**seen, "version": version}, *_as_outputs(("memory", "cache"), values)]

        tick = {"concurrency_limit": None, "show_progress": "hidden", "api_visibility": "private"}
        fast.tick(refresh_live, [seen_live], [seen_live, *(live_components[k] for k in outputs)], **tick)
        slow.tick(refresh_plots, [seen_plot], [seen_plot, memory_plot, cache_plot], **tick)

        chat.clear(lambda seen: clear_chat(live.snapshot(), seen), [seen_live], [seen_live], api_visibility="private")

        def command(method: Callable[..., Feedback]) -> Callable[..., str]:
            return lambda *args: feedback_markdown(method(*args))

        if not fleet:
            start.click(command(controls.start), [kind, upload, location, camera, source_stream], [source_msg])
            stop.click(command(controls.stop), [source_stream], [source_msg])
            reset.click(command(controls.reset), [source_stream], [source_msg])
            apply.click(command(controls.set_standing), [standing, every], [standing_msg])
        remove.click(command(controls.remove_stream), [source_stream], [source_msg])

        def on_ask(text: str, target: str | None) -> tuple[str, str]:
            feedback = controls.ask(text, target)
            return ("" if feedback.ok else text), feedback_markdown(feedback)

        def on_add(name: str, *source: Any) -> tuple[str, str]:
            feedback = controls.add_stream(name, *source)
            return ("" if feedback.ok else name), feedback_markdown(feedback)

        add.click(on_add, [new_name, kind, upload, location, camera], [new_name, add_msg])
        ask_box.submit(on_ask, [ask_box, ask_stream], [ask_box, ask_msg])
        ask.click(on_ask, [ask_box, ask_stream], [ask_box, ask_msg])
    return page
