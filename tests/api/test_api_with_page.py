"""`--ui` serves the API on the page's server, before Gradio's routes and behind the page's guard; on loopback
without a login it needs no token (as the page), and a page login without API tokens leaves the API off (decided
before the page is served: checked in-process, the two pages that serve an API are real programs)."""

import os
import subprocess
import time
from pathlib import Path
from types import SimpleNamespace

import httpx
import pytest

from app.cli import parse_args
from app.config import AppConfig
from app.web import page_api
from tests.api.test_api_server import free_port
from tests.support.api_tokens import make_token
from tests.support.app_helpers import app_command, video

TOKEN = make_token("page")


class Page:
    """`python -m app --ui ...` on a free port, started by `launch` and waited for by `ready`."""

    def __init__(self, folder: Path, *extra: str) -> None:
        self.port = free_port()
        self.base = f"http://127.0.0.1:{self.port}"
        self.output = folder / "page.txt"
        args = app_command(
            "--ui", "--model", "tiny", "--video", str(video(60)), "--loop", "--port", str(self.port), "--budget",
            "256", "--window", "16", "--max-new-tokens", "4", "--quiet", "--timeline", str(folder / "t.sqlite"),
            *extra,
        )  # fmt: skip
        env = {**os.environ, "PYTHONUNBUFFERED": "1"}
        env.pop("EDGE_ASSISTANT_AUTH", None)
        env.pop("EDGE_ASSISTANT_API_TOKENS", None)
        self.process = subprocess.Popen(args, stdout=open(self.output, "w"), stderr=subprocess.STDOUT, env=env)

    def ready(self) -> str:
        """Waits for "page ready"; returns what the page wrote so far."""
        deadline = time.monotonic() + 240
        while "page ready" not in self.output.read_text():
            assert self.process.poll() is None, self.output.read_text()[-3000:]
            assert time.monotonic() < deadline
            time.sleep(0.05)
        return self.output.read_text()

    def stop(self) -> int:
        self.process.terminate()
        return self.process.wait(60)


def _private(path: Path, text: str) -> Path:
    path.write_text(text)
    path.chmod(0o600)
    return path


@pytest.fixture(scope="module")
def pages(tmp_path_factory):
    """The two pages, started at once so that their starts overlap; each test checks and stops its own."""
    folders = {name: tmp_path_factory.mktemp(name) for name in ("open", "login-and-tokens")}
    both = folders["login-and-tokens"]
    started = {
        "open": Page(folders["open"]),
        "login-and-tokens": Page(
            both,
            "--auth-file",
            str(_private(both / "login", "me:a-long-password\n")),
            "--api-tokens-file",
            str(_private(both / "tokens", f"{TOKEN} read,ask phone\n")),
        ),
    }
    yield started
    for page in started.values():
        if page.process.poll() is None:
            page.process.kill()
            page.process.wait()


def test_the_page_serves_the_api_on_loopback_without_a_token(pages):
    page = pages["open"]
    try:
        output = page.ready()
        with httpx.Client(base_url=page.base, timeout=120) as client:
            assert "api ready" in output
            assert client.get("/").status_code == 200  # the page is still there
            (stream,) = client.get("/api/v1/streams").json()
            reply = client.post("/api/v1/ask", json={"question": "What is there?", "stream": stream["name"]})
            assert reply.status_code == 200 and reply.json()["answers"]
            assert client.get("/api/v1/openapi.json").json()["paths"]["/api/v1/ask"]
            assert client.get("/api/v1/streams", headers={"Host": "evil.example"}).status_code == 421
            assert client.post("/api/v1/ask", content=b"x" * 70_000).status_code == 413
    finally:
        assert page.stop() == 0


def test_a_page_login_without_api_tokens_leaves_the_api_off(tmp_path, monkeypatch, capsys):
    """What `--ui --auth-file` (no --api-tokens-file) gives the page to serve: no API, and a line that says why
    and how to turn it on (the page then mounts none: app/web.py serves `page_api`'s result)."""
    monkeypatch.delenv("EDGE_ASSISTANT_API_TOKENS", raising=False)
    login = _private(tmp_path / "login", "me:a-long-password\n")
    config = AppConfig.from_args(parse_args(["--ui", "--model", "tiny", "--auth-file", str(login)]))
    launched = SimpleNamespace(desk=None, options=None, history=None, watches=None)  # never reached: refused first
    assert page_api(config, launched) is None
    said = capsys.readouterr().err
    assert "api off:" in said and "--api-tokens-file" in said


def test_next_to_a_page_login_the_api_answers_its_own_tokens_and_the_page_still_wants_its_login(pages):
    """The page's login gate leaves the API's routes to their bearer tokens (no cookie there), while every route
    of the page itself still answers 401 before the login."""
    page = pages["login-and-tokens"]
    try:
        output = page.ready()
        assert "api ready" in output, output[-2000:]
        with httpx.Client(base_url=page.base, timeout=120) as client:
            assert client.get("/api/v1/streams").status_code == 401  # the API's own refusal: no token
            bearer = {"Authorization": f"Bearer {TOKEN}"}
            (stream,) = client.get("/api/v1/streams", headers=bearer).json()
            reply = client.post("/api/v1/ask", json={"question": "What is there?"}, headers=bearer)
            assert reply.status_code == 200 and reply.json()["answers"], reply.text
            missing = client.get("/v1/models")  # inside Gradio's app too, /v1 refuses with OpenAI's error object
            assert missing.status_code == 401 and missing.json()["error"]["type"] == "authentication_error"
            assert client.get("/v1/engines", headers=bearer).json()["error"]["code"] == "unknown_url"
            assert client.get("/config").status_code == 401  # the page's data still needs the page's login
            assert client.get("/config", headers=bearer).status_code == 401  # an API token is no page login
        assert TOKEN not in page.output.read_text()
    finally:
        assert page.stop() == 0
