"""The History tab's Day view: a period, a stream and a Draw button; the strips (ui.day renders them) and, under
them, the clicked segment's moment. Drawing and the thumbnail's read run on the Gradio handler's thread."""

from __future__ import annotations

import gradio as gr

from ui import day, history
from ui.day import DaySource


def build(source: DaySource, streams: tuple[str, ...]) -> gr.Dropdown:
    """The view's components and handlers (call inside `with gr.Tab(...)`); returns its stream selector (the page
    gives it streams added later)."""
    with gr.Row():
        period = gr.Dropdown(
            list(day.PERIODS), value=day.DEFAULT_PERIOD, show_label=False, scale=1, min_width=140, elem_id="day-period"
        )
        stream = gr.Dropdown(
            [history.ALL, *streams], value=history.ALL, show_label=False, scale=1, min_width=140, elem_id="day-stream"
        )
        draw = gr.Button("Draw", variant="primary", scale=1, elem_id="day-draw")
    shown = gr.State(None)  # the day the strips show: a click names one of its segments
    strips = gr.HTML(day.PROMPT, css_template=day.CSS, js_on_load=day.CLICK_JS, elem_id="day-strips")
    detail = gr.HTML(day.DETAIL_PROMPT, css_template=day.CSS, js_on_load=None, elem_id="day-detail")

    def run(which_period: str, which_stream: str | None):
        return day.day_view(source, which_period, which_stream)

    def show(result, evt: gr.EventData) -> str:
        try:
            key = str(evt.seg)
        except (AttributeError, TypeError):  # a click beside every segment
            key = None
        return day.moment_html(source, result, key)

    options = {"concurrency_id": "history", "concurrency_limit": 2, "api_visibility": "private"}
    draw.click(run, [period, stream], [strips, shown], **options)
    strips.click(show, [shown], [detail], **options)
    return stream
