"""The History tab's Recap view: a period, a stream and a Recap button; the recap's lines (ui.recap renders them).
Reading the recap runs on the Gradio handler's thread."""

from __future__ import annotations

import gradio as gr

from ui import day, history, recap
from ui.recap import RecapSource


def build(source: RecapSource, streams: tuple[str, ...]) -> gr.Dropdown:
    """The view's components and its button (call inside `with gr.Tab(...)`); returns its stream selector (the
    page gives it streams added later)."""
    with gr.Row():
        shape = {"show_label": False, "scale": 1, "min_width": 140}
        period = gr.Dropdown(list(day.PERIODS), value=day.DEFAULT_PERIOD, elem_id="recap-period", **shape)
        stream = gr.Dropdown([history.ALL, *streams], value=history.ALL, elem_id="recap-stream", **shape)
        button = gr.Button("Recap", variant="primary", scale=1, elem_id="recap-run")
    lines = gr.HTML(recap.PROMPT, css_template=recap.CSS, elem_id="recap-lines")

    def run(which_period: str, which_stream: str | None) -> str:
        return recap.recap_view(source, which_period, which_stream)

    options = {"concurrency_id": "history", "concurrency_limit": 2, "api_visibility": "private"}
    button.click(run, [period, stream], [lines], **options)
    return stream
