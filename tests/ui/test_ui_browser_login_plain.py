"""The login and plain chat text in a real browser: `python -m app --ui --model tiny` with a login from the
environment, driven by headless chromium (tests/ui_browser/login_plain_test.js): Gradio's login form refuses a
wrong password and accepts the right one (through the page's gate: same-origin, Host checked); a question with
a markdown image, a markdown link and a bare URL pointing at a counting HTTP server on 127.0.0.1 shows as text,
and the server is never asked for anything."""

from __future__ import annotations

import http.server
import threading

from tests.ui.test_ui_browser import browser, drive_app
from ui.access import AUTH_ENV

__all__ = ["browser"]  # the fixture: a missing browser fails (or skips) before the app starts


class Counting(http.server.BaseHTTPRequestHandler):
    hits: list[str] = []

    def do_GET(self) -> None:  # noqa: N802 (the standard library's name)
        Counting.hits.append(self.path)
        self.send_response(204)
        self.end_headers()

    def log_message(self, *args) -> None:
        pass


def test_the_login_form_works_and_questions_show_no_remote_image_or_link(browser, tmp_path, monkeypatch):
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Counting)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    Counting.hits = []
    monkeypatch.setenv(AUTH_ENV, "ann:a long test password")
    try:
        evil = f"http://127.0.0.1:{server.server_address[1]}"
        seen, app, code = drive_app(
            ["--ui", "--model", "tiny", "--budget", "256", "--max-new-tokens", "8"],
            "login_plain_test.js",
            tmp_path,
            ["ann", "a long test password", evil],
            ["login-plain.png"],
        )
    finally:
        server.shutdown()
        thread.join(5)
    assert seen["loggedIn"] and seen["question"]["images"] == [] and seen["question"]["links"] == []
    assert Counting.hits == [], Counting.hits
    assert code == 0 and "Traceback" not in app.output and "a long test password" not in app.output
