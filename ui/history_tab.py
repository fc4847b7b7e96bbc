"""The History tab: a search box, a stream filter, a time filter and a Search button over the timeline; the
results as a table (ui.history renders it). Searching runs on the Gradio handler's thread."""

from __future__ import annotations

import gradio as gr

from ui import history
from ui.history import HistorySource


def build(source: HistorySource | None, streams: tuple[str, ...]) -> gr.Dropdown | None:
    """The tab's components and its Search button (call inside `with gr.Tab(...)`); returns its stream selector
    (the page gives it streams added later). `source` None: the timeline is off, and the tab says so."""
    if source is None:
        gr.Markdown(history.OFF_MESSAGE, elem_id="history-off")
        return None
    with gr.Row():
        text = gr.Textbox(
            placeholder="words of a question, an answer or an alert (empty: the newest moments)",
            show_label=False,
            scale=4,
            elem_id="history-text",
        )
        stream = gr.Dropdown(
            [history.ALL, *streams],
            value=history.ALL,
            show_label=False,
            scale=1,
            min_width=140,
            elem_id="history-stream",
        )
        period = gr.Dropdown(
            list(history.PERIODS),
            value=history.DEFAULT_PERIOD,
            show_label=False,
            scale=1,
            min_width=140,
            elem_id="history-period",
        )
        search = gr.Button("Search", variant="primary", scale=1, elem_id="history-search")
    results = gr.HTML(
        '<p class="history-empty"><i>Search what the assistant saw: its answers, alerts and stream events.</i></p>',
        css_template=history.TABLE_CSS,
        elem_id="history-results",
    )

    def run(words: str, which: str | None, since: str) -> str:
        return history.search_html(source, words, which, since)

    options = {"concurrency_id": "history", "concurrency_limit": 2, "api_visibility": "private"}
    search.click(run, [text, stream, period], [results], **options)
    text.submit(run, [text, stream, period], [results], **options)
    return stream
