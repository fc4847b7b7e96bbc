"""Helpers of the tests/test_harden_page_*.py files: a small Gradio page served by the app's own `launch_page` on
127.0.0.1 (a free port), a hand-moved clock for the login throttle, and a login call."""

from __future__ import annotations

import contextlib
import socket
from collections.abc import Iterator

import gradio as gr
import httpx

from app.config import UIConfig
from app.web import launch_page
from ui.access import PageLogin
from ui.login_throttle import LoginThrottle

PASSWORD = "a-long-test-password"
LOGIN = PageLogin("ann", PASSWORD)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Clock:
    """A clock the test moves by hand: the throttle's locks pass without waiting."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def small_page() -> gr.Blocks:
    with gr.Blocks() as page:
        text = gr.Textbox()
        out = gr.Textbox()
        text.submit(lambda x: x.upper(), [text], [out], api_name="up")
        gr.File(label="video")
    page.queue()
    return page


@contextlib.contextmanager
def served(ui: UIConfig | None = None, login: PageLogin | None = LOGIN, **launch) -> Iterator[tuple[str, gr.Blocks]]:
    """(base URL, page) of `small_page` served as `ui` says (a free port on 127.0.0.1 unless given)."""
    ui = ui or UIConfig(port=free_port())
    page = small_page()
    launch_page(page, ui, login, **launch)
    try:
        yield f"http://127.0.0.1:{page.server_port}", page
    finally:
        page.close()


def throttle(clock: Clock) -> LoginThrottle:
    return LoginThrottle(free=3, first_lock_s=10.0, clock=clock)


def login(client: httpx.Client, base: str, password: str, headers: dict | None = None) -> int:
    sent = {"username": LOGIN.user, "password": password}
    return client.post(f"{base}/login", data=sent, headers=headers or {}).status_code
