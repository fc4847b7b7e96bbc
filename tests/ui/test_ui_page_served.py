"""The whole app serving its page (`python -m app --ui --model tiny` on 127.0.0.1, a free port) with a login given
in the environment: the terminal says the real address and the user but never the password; the page refuses
anonymous requests and foreign Host names; uploads land in a private folder of the run, gone after Ctrl-C."""

from __future__ import annotations

import stat
import time
from pathlib import Path

import httpx
import pytest

from tests.ui.test_ui_browser import AppProcess, free_port
from ui.access import AUTH_ENV

PASSWORD = "correct horse battery"


@pytest.fixture
def app_with_login(monkeypatch):
    monkeypatch.setenv(AUTH_ENV, f"ann:{PASSWORD}")
    port = free_port()
    process = AppProcess(["--ui", "--model", "tiny", "--port", str(port), "--budget", "256"])
    try:
        process.wait_ready(120)
        deadline = time.monotonic() + 10
        while not any(line.startswith("login required") for line in process.lines) and time.monotonic() < deadline:
            time.sleep(0.1)  # the line after "page ready:"
        process.base = f"http://127.0.0.1:{port}"
        process.port = port
        yield process
    finally:
        if process.proc.poll() is None:
            process.proc.kill()
            process.proc.wait(10)


def test_a_page_with_a_login_refuses_strangers_and_keeps_uploads_private(app_with_login):
    app, base = app_with_login, app_with_login.base
    assert f"page ready: http://127.0.0.1:{app.port}/" in app.lines
    assert "login required: user ann" in app.lines and PASSWORD not in app.output
    with httpx.Client() as anonymous:
        assert anonymous.get(f"{base}/config").status_code == 401
        assert anonymous.post(f"{base}/gradio_api/upload", files={"files": ("a.mp4", b"x")}).status_code == 401
    assert httpx.get(f"{base}/", headers={"Host": "rebound.example"}).status_code == 421
    with httpx.Client() as person:
        assert person.post(f"{base}/login", data={"username": "ann", "password": PASSWORD}).status_code == 200
        assert person.get(f"{base}/config").status_code == 200
        uploaded = person.post(f"{base}/gradio_api/upload", files={"files": ("clip.mp4", b"not really a video")})
        assert uploaded.status_code == 200, uploaded.text
    path = Path(uploaded.json()[0])
    folder = next(p for p in path.parents if p.name.startswith("edge-assistant-page-"))
    info = folder.stat()
    assert stat.S_IMODE(info.st_mode) == 0o700 and path.read_bytes() == b"not really a video"
    assert app.interrupt() == 0, app.output
    assert not folder.exists() and "Traceback" not in app.output
