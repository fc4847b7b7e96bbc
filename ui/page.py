"""The Gradio page: `build_page` lays out its sections (ui.page_layout, one function each), wires its buttons to
`Controls` (commands) and its timers to `LiveState` (display: ui.page_refresh, which says how every open tab is
refreshed from the shared state).

With several streams, each has a panel (frame, caption, status) above the controls; the chat names each
turn's stream and a selector sends a question to one stream or to all; the source buttons act on the stream
chosen in theirs.

The page leaves out what its assistant cannot do (`bus.desk.DeskAbilities`): on a fleet's head, each stream's
cache living on its host, Start (a new source in place), Stop, Reset memory and the standing question's editor;
and it adds network streams only there, so its source is the URL box alone (no file upload, no camera). Adding
and removing streams and asking questions stay.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import gradio as gr
from gradio.utils import get_upload_folder

from bus.desk import ONE_BOX_ABILITIES, DeskAbilities, Schedule
from ui import day_tab, history_tab, page_layout, recap_tab, stream_slots, watch_section
from ui.controls import Controls, Feedback
from ui.history import HistorySource
from ui.page_layout import ChatBox, SourcePicker, StandingEditor, StreamAdder
from ui.page_refresh import clear_chat, live_updates, plot_updates, wire_timers
from ui.plain_text import plain_text
from ui.preview_files import PreviewFiles
from ui.render import PageInfo
from ui.state import LiveState
from ui.watch_form import WatchForm

# clear_chat, live_updates and plot_updates live in ui.page_refresh; named here too, where tests have long found them
__all__ = ["build_page", "clear_chat", "feedback_markdown", "live_updates", "plot_updates", "preview_folder"]


def build_page(
    live: LiveState,
    controls: Controls,
    info: PageInfo,
    schedule: Schedule,
    previews: PreviewFiles,
    initial_source: str = "",
    history: HistorySource | None = None,
    abilities: DeskAbilities = ONE_BOX_ABILITIES,
    watches: WatchForm | None = None,
) -> gr.Blocks:
    """The whole page, for the streams `live` was made with. `previews` holds the preview frames as files (see
    `preview_folder`); `initial_source` fills the path box (the first stream's source, if given); `history`
    searches the timeline (None: the timeline is off; the History tab says so); `abilities`: what the
    assistant can do (bus.desk; a fleet's: no Start, Stop, Reset memory, standing question's editor, file and
    camera sources, the module's docstring); `watches`: the "Watch for" section's commands (None: no such section)."""
    streams = tuple(view.name for view in live.snapshot().streams)
    multi = len(streams) > 1
    with gr.Blocks(title="Edge streaming video assistant", analytics_enabled=False) as page:
        # what the fast timer refreshes, by output name
        shown: page_layout.Components = {"banner": page_layout.header(info)}
        with gr.Tabs(elem_id="tabs"):
            with gr.Tab("Live", elem_id="live-tab"):
                shown |= page_layout.stream_panels(live, streams, stream_slots.spare_count(streams))
                with gr.Row():
                    with gr.Column(scale=1):
                        if not multi:
                            shown |= page_layout.one_stream_preview(live)
                        picker = page_layout.source_picker(streams, initial_source, abilities)
                        adder = page_layout.stream_adder()
                    with gr.Column(scale=1):
                        chat = page_layout.chat_box(streams)
                        standing = None
                        if abilities.standing_question:
                            standing = page_layout.standing_question(schedule, streams)
                watch = None if watches is None else watch_section.build(watches, streams)
                shown["alerts"] = page_layout.alerts_list()
                plots = page_layout.plots(info.memory_label, streams)
                shown["log"] = page_layout.activity_log()
            with gr.Tab("History", elem_id="history-tab"):
                history_stream, day_stream, recap_stream = _history_views(history, streams)

        shown |= {"chat": chat.chat, "ask-stream": chat.stream, "source-stream": picker.stream}
        if history_stream is not None:
            shown |= {"history-stream": history_stream, "day-stream": day_stream, "recap-stream": recap_stream}
        if watch is not None:
            shown["watch-stream"] = watch.stream
        wire_timers(
            live,
            streams,
            shown,
            plots,
            schedule=schedule,
            previews=previews,
            memory_label=info.memory_label,
            history=history,
        )
        _wire_commands(controls, picker, adder, chat, standing)
        if watch is not None:
            watch_section.wire(watches, watch, feedback_markdown)
    return page


def _history_views(history: HistorySource | None, streams: tuple[str, ...]):
    """The History tab: Search (ui.history_tab), Day (ui.day_tab) and Recap (ui.recap_tab) views; their stream
    selectors (None, None, None with the timeline off: the tab says so)."""
    if history is None:
        return history_tab.build(None, streams), None, None
    with gr.Tabs(elem_id="history-views"):
        with gr.Tab("Search", elem_id="history-search-tab"):
            search_stream = history_tab.build(history, streams)
        with gr.Tab("Day", elem_id="history-day-tab"):
            day_stream = day_tab.build(history, streams)
        with gr.Tab("Recap", elem_id="history-recap-tab"):
            recap_stream = recap_tab.build(history, streams)
    return search_stream, day_stream, recap_stream


def preview_folder() -> Path:
    """Where preview frames go: inside Gradio's file cache (so they are served without a copy)."""
    return Path(get_upload_folder()) / "edge-assistant-previews"


def feedback_markdown(feedback: Feedback) -> str:
    """The clicking tab's message (plain text: it may hold what was typed); a refusal also pops up as a warning."""
    if feedback.ok:
        return plain_text(feedback.message)
    gr.Warning(feedback.message)
    return f"⚠ {plain_text(feedback.message)}"


def _wire_commands(
    controls: Controls,
    picker: SourcePicker,
    adder: StreamAdder,
    chat: ChatBox,
    standing: StandingEditor | None,
) -> None:
    """The buttons (and the question box's Enter) as `Controls` commands; each answers in its section's message."""

    def command(method: Callable[..., Feedback]) -> Callable[..., str]:
        return lambda *args: feedback_markdown(method(*args))

    if picker.in_place is not None:
        buttons = picker.in_place
        buttons.start.click(command(controls.start), [*picker.source, picker.stream], [picker.message])
        buttons.stop.click(command(controls.stop), [picker.stream], [picker.message])
        buttons.reset.click(command(controls.reset), [picker.stream], [picker.message])
    if standing is not None:
        standing.apply.click(command(controls.set_standing), [standing.question, standing.every], [standing.message])
    picker.remove.click(command(controls.remove_stream), [picker.stream], [picker.message])

    def on_ask(text: str, target: str | None) -> tuple[str, str]:
        feedback = controls.ask(text, target)
        return ("" if feedback.ok else text), feedback_markdown(feedback)

    def on_add(name: str, *source: Any) -> tuple[str, str]:
        feedback = controls.add_stream(name, *source)
        return ("" if feedback.ok else name), feedback_markdown(feedback)

    adder.add.click(on_add, [adder.name, *picker.source], [adder.name, adder.message])
    chat.box.submit(on_ask, [chat.box, chat.stream], [chat.box, chat.message])
    chat.ask.click(on_ask, [chat.box, chat.stream], [chat.box, chat.message])
