"""The Live tab's "Watch for" section: a yes/no question, the stream it watches, how often it is checked, an optional
expiry and one-shot, Add; the list of watches and End (a selector of the runtime ones). Commands go to a
`WatchForm` (ui.watch_form); a timer refreshes the list in every tab, so watches set by the API, the terminal or
another tab appear too."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import gradio as gr

from ui.controls import ALL_STREAMS, Feedback
from ui.watch_form import CHECK_MODES, EVERY, TABLE_CSS, WatchForm

REFRESH_S = 1.0


@dataclass(frozen=True)
class WatchSection:
    question: gr.Textbox
    stream: gr.Dropdown
    mode: gr.Radio
    every: gr.Number
    expires: gr.Number
    one_shot: gr.Checkbox
    name: gr.Textbox
    add: gr.Button
    message: gr.Markdown
    listing: gr.HTML
    chosen: gr.Dropdown
    end: gr.Button


def build(form: WatchForm, streams: tuple[str, ...]) -> WatchSection:
    """The section's components (call inside the Live tab); wire them with `wire`."""
    multi = len(streams) > 1
    with gr.Accordion("Watch for (tell me when ...)", open=True, elem_id="watch-section"):
        with gr.Row():
            question = gr.Textbox(
                placeholder="a yes/no question, e.g. Is there a person at the door?",
                show_label=False,
                scale=4,
                elem_id="watch-question",
            )
            stream = gr.Dropdown(
                [ALL_STREAMS, *streams],
                value=ALL_STREAMS,  # also with one stream: a watch set then watches the streams added later too
                show_label=False,
                visible=multi,
                scale=1,
                min_width=140,
                elem_id="watch-stream",
            )
        with gr.Row():
            mode = gr.Radio(list(CHECK_MODES), value=EVERY, label="checked", scale=2, elem_id="watch-mode")
            every = gr.Number(value=10, label="N (s of stream)", scale=1, elem_id="watch-every")
            expires = gr.Number(value=None, label="ends after (min, empty: never)", scale=1, elem_id="watch-expires")
            one_shot = gr.Checkbox(label="once: end at its first alert", scale=1, elem_id="watch-once")
        with gr.Row():
            name = gr.Textbox(placeholder="name (optional), e.g. door-person", show_label=False, scale=3,
                              elem_id="watch-name")  # fmt: skip
            add = gr.Button("Add watch", variant="primary", scale=1, elem_id="watch-add")
        message = gr.Markdown(elem_id="watch-msg")
        listing = gr.HTML(form.html(), css_template=TABLE_CSS, elem_id="watch-list")
        with gr.Row():
            names = form.names()
            # a typed name is let through (WatchForm.end says when there is none): the choices change under a tab
            # (the timer, End, other tabs), and a value from just before must not fail Gradio's own check
            chosen = gr.Dropdown(
                names, value=None, label="watch to end", scale=3, elem_id="watch-end-name", allow_custom_value=True
            )
            end = gr.Button("End watch", scale=1, elem_id="watch-end")
    return WatchSection(question, stream, mode, every, expires, one_shot, name, add, message, listing, chosen, end)


def wire(form: WatchForm, section: WatchSection, feedback_markdown: Callable[[Feedback], str]) -> None:
    """Add and End as `WatchForm` commands (their answer in the section's message, the list redrawn at once), and
    the timer that redraws the list in every tab when it changed (the watch chosen to end stays chosen while it
    is there)."""

    def redraw(seen: dict, chosen: str | None, force: bool = False) -> tuple[dict, Any, Any]:
        listing, names = form.html(), form.names()
        if not force and seen.get("listing") == listing and seen.get("names") == names:
            return seen, gr.skip(), gr.skip()
        keep = chosen if chosen in names else None
        end_choice = gr.update(choices=names, value=keep) if force or seen.get("names") != names else gr.skip()
        return {"listing": listing, "names": names}, listing, end_choice

    def on_add(seen: dict, chosen: str | None, *args: Any) -> tuple[Any, ...]:
        feedback = form.add(*args)
        typed = ("", "") if feedback.ok else (gr.skip(), gr.skip())  # the question and name boxes
        return (*redraw(seen, chosen, force=feedback.ok), *typed, feedback_markdown(feedback))

    def on_end(seen: dict, chosen: str | None) -> tuple[Any, ...]:
        feedback = form.end(chosen)
        return (*redraw(seen, chosen, force=feedback.ok), feedback_markdown(feedback))

    seen = gr.State({})
    shown = [seen, section.listing, section.chosen]
    inputs = [section.question, section.stream, section.mode, section.every, section.expires, section.one_shot,
              section.name]  # fmt: skip
    added = [*shown, section.question, section.name, section.message]
    private = {"api_visibility": "private"}
    section.add.click(on_add, [seen, section.chosen, *inputs], added, **private)
    section.question.submit(on_add, [seen, section.chosen, *inputs], added, **private)
    section.end.click(on_end, [seen, section.chosen], [*shown, section.message], **private)
    timer = gr.Timer(REFRESH_S)
    timer.tick(
        lambda seen, chosen: redraw(seen, chosen),
        [seen, section.chosen],
        shown,
        concurrency_limit=None,
        show_progress="hidden",
        **private,
    )
