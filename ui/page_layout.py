"""The page's sections, one function each, called in page order inside `ui.page.build_page`'s `gr.Blocks`.

Each builds its components where it is called and returns them (a dict of the fast timer's outputs, by output
name, or a small record of the components its commands need); none wires an event: ui.page and ui.page_refresh
do, once every section exists.
"""

from __future__ import annotations

from dataclasses import dataclass

import gradio as gr

from bus.desk import DeskAbilities, Schedule
from ui import alert_view, render, stream_slots
from ui.alerts import MAX_ALERTS
from ui.controls import ALL_STREAMS, MAX_STREAMS, SOURCE_KINDS, VIDEO_EXTENSIONS
from ui.state import LiveState

Components = dict[str, gr.components.Component]


@dataclass(frozen=True)
class InPlaceButtons:
    """Start (a new source in place), Stop and Reset memory: left off where the assistant cannot (a fleet)."""

    start: gr.Button
    stop: gr.Button
    reset: gr.Button


@dataclass(frozen=True)
class SourcePicker:
    """The stream the source buttons act on, the source (kind, file, path or URL, camera) and its buttons."""

    stream: gr.Dropdown
    kind: gr.Radio
    upload: gr.File
    location: gr.Textbox
    camera: gr.Number
    in_place: InPlaceButtons | None  # None where the assistant cannot (a fleet)
    remove: gr.Button
    message: gr.Markdown

    @property
    def source(self) -> list[gr.components.Component]:
        """The inputs that name a source, in `Controls.start`'s and `Controls.add_stream`'s order."""
        return [self.kind, self.upload, self.location, self.camera]


@dataclass(frozen=True)
class StreamAdder:
    """A name box and Add stream: a new stream watching the source picked above."""

    name: gr.Textbox
    add: gr.Button
    message: gr.Markdown


@dataclass(frozen=True)
class ChatBox:
    """The shared chat and the question box, with the stream a question goes to."""

    chat: gr.Chatbot
    stream: gr.Dropdown
    box: gr.Textbox
    ask: gr.Button
    message: gr.Markdown


@dataclass(frozen=True)
class StandingEditor:
    """The standing question and how often it is asked (the first stream's)."""

    question: gr.Textbox
    every: gr.Number
    apply: gr.Button
    message: gr.Markdown


@dataclass(frozen=True)
class Plots:
    memory: gr.LinePlot
    cache: gr.LinePlot


def header(info: render.PageInfo) -> gr.HTML:
    """The title, the alert banner (returned: the fast timer fills it) and the model's and cache's settings."""
    gr.Markdown("## Edge streaming video assistant")
    banner = gr.HTML(alert_view.banner_html(()), elem_id="alert-banner")
    gr.Markdown(render.settings_markdown(info), elem_id="settings")
    return banner


def stream_panels(live: LiveState, streams: tuple[str, ...], spares: int) -> Components:
    """With several streams, the summary `status` and one column per stream: its latest frame, caption and status;
    then `spares` hidden ones for streams added later (ui.stream_slots). With one stream, only the spares (its
    preview is `one_stream_preview`). {output name: component}."""
    components: Components = {}
    multi = len(streams) > 1
    if multi:
        components["status"] = gr.Markdown(elem_id="status")
    with gr.Row(equal_height=False):
        for name in streams if multi else ():
            view = live.snapshot().stream(name)
            with gr.Column(min_width=280, elem_id=f"stream-{name}", elem_classes=["stream-panel"]):
                components[f"preview:{name}"] = gr.Image(
                    label=f"stream {name}", type="filepath", interactive=False, elem_id=f"preview-{name}", height=220
                )
                components[f"caption:{name}"] = gr.Markdown(render.preview_caption(view), elem_id=f"caption-{name}")
                components[f"panel:{name}"] = gr.Markdown(render.stream_status(view), elem_id=f"status-{name}")
        components |= stream_slots.build_spares(spares)  # hidden: they take no room until a stream is added
    return components


def one_stream_preview(live: LiveState) -> Components:
    """The one stream's latest frame, its caption and status; {output name: component}."""
    return {
        "preview": gr.Image(label="Live preview", type="filepath", interactive=False, elem_id="preview", height=300),
        "caption": gr.Markdown(render.preview_caption(live.snapshot()), elem_id="preview-caption"),
        "status": gr.Markdown(elem_id="status"),
    }


def source_picker(streams: tuple[str, ...], initial_source: str, abilities: DeskAbilities) -> SourcePicker:
    """The source and its buttons, as the assistant's `abilities` allow: without local sources (a fleet) the URL
    box alone, for network streams; without in-place commands no Start, Stop or Reset memory."""
    local, in_place_ok = abilities.local_sources, abilities.in_place
    with gr.Group():
        stream = gr.Dropdown(
            list(streams),
            value=streams[0],
            label="Stream to remove" if not in_place_ok else "Stream the source buttons act on",
            visible=len(streams) > 1,
            elem_id="source-stream",
        )
        kind = gr.Radio(
            list(SOURCE_KINDS),
            value="path or URL" if initial_source or not local else "file upload",
            label="Source",
            visible=local,
            elem_id="source-kind",
        )
        upload = gr.File(
            label="Video file",
            file_types=list(VIDEO_EXTENSIONS),
            type="filepath",
            height=120,
            visible=local,
            elem_id="upload",
        )
        location = gr.Textbox(
            value=initial_source,
            label="Stream URL (rtsp, http or https)" if not local else "Path or URL",
            placeholder=(
                "rtsp://camera/stream, https://host/live.m3u8"
                if not local
                else "/path/to/video.mp4, rtsp://camera/stream, https://host/clip.mp4"
            ),
            elem_id="location",
        )
        camera = gr.Number(value=0, label="Camera index", precision=0, minimum=0, visible=local, elem_id="camera")
    with gr.Row():
        in_place = None
        if in_place_ok:
            in_place = InPlaceButtons(
                gr.Button("Start", variant="primary", elem_id="start"),
                gr.Button("Stop", elem_id="stop"),
                gr.Button("Reset memory", elem_id="reset"),
            )
        remove = gr.Button("Remove stream", elem_id="remove-stream")
    message = gr.Markdown(elem_id="source-msg")
    return SourcePicker(stream, kind, upload, location, camera, in_place, remove, message)


def stream_adder() -> StreamAdder:
    with gr.Row():
        name = gr.Textbox(
            label=f"Add a stream watching the source above (at most {MAX_STREAMS} streams)",
            placeholder="its name, e.g. door",
            scale=3,
            elem_id="new-stream-name",
        )
        add = gr.Button("Add stream", scale=1, elem_id="add-stream")
    return StreamAdder(name, add, gr.Markdown(elem_id="add-stream-msg"))


def chat_box(streams: tuple[str, ...]) -> ChatBox:
    """The chat, then the question row: the stream selector (several streams only), the box and Ask."""
    multi = len(streams) > 1
    chat = gr.Chatbot(
        label="Questions and answers",
        height=460,
        elem_id="chat",
        buttons=["copy"],
        latex_delimiters=[],  # people's and the model's text is plain (ui.plain_text)
    )
    with gr.Row():
        stream = gr.Dropdown(
            [ALL_STREAMS, *streams],
            value=ALL_STREAMS if multi else streams[0],
            show_label=False,
            visible=multi,
            scale=2,
            min_width=150,
            elem_id="ask-stream",
        )
        box = gr.Textbox(placeholder="Ask about the stream, then Enter", show_label=False, scale=4, elem_id="ask-box")
        ask = gr.Button("Ask", scale=1, elem_id="ask")
    return ChatBox(chat, stream, box, ask, gr.Markdown(elem_id="ask-msg"))


def standing_question(schedule: Schedule, streams: tuple[str, ...]) -> StandingEditor:
    """The standing question's editor (not where it cannot change: a fleet's hosts hold each stream's own copy)."""
    with gr.Row():
        question = gr.Textbox(
            value=schedule.question,
            label=f"Standing question ({streams[0]})" if len(streams) > 1 else "Standing question",
            scale=3,
            elem_id="standing",
        )
        every = gr.Number(
            value=schedule.every_s, label="every (s of stream, 0 = never)", minimum=0, scale=1, elem_id="every"
        )
        apply = gr.Button("Apply", scale=1, elem_id="apply")
    return StandingEditor(question, every, apply, gr.Markdown(elem_id="standing-msg"))


def alerts_list() -> gr.HTML:
    with gr.Accordion(f"Alerts (the latest {MAX_ALERTS}, newest first)", open=True, elem_id="alerts-section"):
        return gr.HTML(alert_view.alerts_html(()), css_template=alert_view.TABLE_CSS, elem_id="alerts-list")


def plots(memory_label: str, streams: tuple[str, ...]) -> Plots:
    """Memory (MiB) and cache size (tokens) over stream time, side by side; the plot timer draws them."""
    memory_props, cache_props = stream_slots.plot_props(memory_label, streams)
    with gr.Row():
        return Plots(
            gr.LinePlot(y="MiB", color="series", y_title="MiB", height=280, elem_id="memory-plot", **memory_props),
            gr.LinePlot(y="tokens", color="series", y_title="tokens", height=280, elem_id="cache-plot", **cache_props),
        )


def activity_log() -> gr.Markdown:
    with gr.Accordion("Activity", open=True):
        return gr.Markdown(elem_id="log")
