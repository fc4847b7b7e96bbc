"""Questions, answers, sources and log lines render as plain text: a markdown image or link (or HTML) in them
shows as typed and makes nothing fetch or link anywhere. Checked on the strings (no syntax character, no bare
URL left) and rendered by a CommonMark parser (markdown-it-py, when installed); tests/test_ui_browser_plain_text.py
checks Gradio's own renderer in a browser."""

from __future__ import annotations

import html
import re

import pytest

from ui import render
from ui.controls import Feedback
from ui.page import feedback_markdown
from ui.plain_text import plain_text
from ui.state import LiveState

HOSTILE = [
    "![x](http://evil.example/x.png)",
    "[click](https://evil.example/login)",
    "see http://evil.example/a and www.evil.example and mail me@evil.example",
    "<img src=http://evil.example/y.png> <a href='http://evil.example'>a</a> <script>alert(1)</script>",
    "**bold** _it_ `code` # head | a | b | ~~del~~ $$x$$ \\[y\\]",
    "<http://evil.example/auto>",
]


def decoded(markdown: str) -> str:
    """What the reader sees of text made of plain characters and numeric references."""
    return html.unescape(markdown)


@pytest.mark.parametrize("text", HOSTILE)
def test_hostile_text_keeps_no_markdown_or_html_and_reads_as_typed(text):
    inert = plain_text(text)
    assert decoded(inert) == text
    assert not re.search(r"[\[\]()<>!*_`#|~@$\\]", re.sub(r"&#\d+;", "", inert))  # no syntax character left
    assert "://" not in inert and "www." not in inert.lower()  # no bare-URL autolink


@pytest.mark.parametrize("text", HOSTILE)
def test_a_markdown_renderer_makes_no_image_or_link_of_it(text):
    markdown_it = pytest.importorskip("markdown_it")
    rendered = markdown_it.MarkdownIt("commonmark").enable("table").enable("strikethrough").render(plain_text(text))
    assert "<img" not in rendered and "<a " not in rendered and "<script" not in rendered
    assert "<strong>" not in rendered and "<code>" not in rendered and "<h1>" not in rendered


def test_questions_answers_sources_and_log_lines_in_the_page_are_plain():
    live = LiveState()
    question = "what is ![x](http://evil.example/x.png)?"
    live.question_queued(question, None)
    markdown = "\n".join(m["content"] for m in render.chat_messages(live.snapshot()))
    assert "![x](" not in markdown and "evil.example/x.png" in decoded(markdown)
    live.note("error", "cannot watch it: [here](http://evil.example/)", 0.0)
    log = render.log_markdown(live.snapshot().log)
    assert "[here](" not in log and "http://evil" not in log and "[here](http://evil.example/)" in decoded(log)
    standing = render.standing_line("<img src=x onerror=alert(1)>", 10)
    assert "<img" not in standing


def test_the_clicking_tabs_message_is_plain_too():
    shown = feedback_markdown(Feedback(True, "“![x](http://evil.example/x.png)” every 10 s"))
    assert "![x](" not in shown and "![x](http://evil.example/x.png)" in decoded(shown)
