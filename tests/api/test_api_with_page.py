"""`--ui` serves the API on the page's server, before Gradio's routes and behind the page's guard; on loopback
without a login it needs no token (as the page), and a page login without API tokens leaves the API off."""

import os
import subprocess
import time

import httpx

from tests.api.test_api_server import free_port
from tests.support.app_helpers import app_command, video


def start(tmp_path, *extra: str) -> tuple[subprocess.Popen, str, object]:
    port = free_port()
    output = tmp_path / "page.txt"
    args = app_command(
        "--ui", "--model", "tiny", "--video", str(video(60)), "--loop", "--port", str(port), "--budget", "256",
        "--window", "16", "--max-new-tokens", "4", "--quiet", "--timeline", str(tmp_path / "t.sqlite"), *extra,
    )  # fmt: skip
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    env.pop("EDGE_ASSISTANT_AUTH", None)
    env.pop("EDGE_ASSISTANT_API_TOKENS", None)
    process = subprocess.Popen(args, stdout=open(output, "w"), stderr=subprocess.STDOUT, env=env)
    deadline = time.monotonic() + 240
    while "page ready" not in output.read_text():
        assert process.poll() is None, output.read_text()[-3000:]
        assert time.monotonic() < deadline
        time.sleep(0.2)
    return process, f"http://127.0.0.1:{port}", output


def test_the_page_serves_the_api_on_loopback_without_a_token(tmp_path):
    process, base, output = start(tmp_path)
    try:
        with httpx.Client(base_url=base, timeout=120) as client:
            assert "api ready" in output.read_text()
            assert client.get("/").status_code == 200  # the page is still there
            (stream,) = client.get("/api/v1/streams").json()
            reply = client.post("/api/v1/ask", json={"question": "What is there?", "stream": stream["name"]})
            assert reply.status_code == 200 and reply.json()["answers"]
            assert client.get("/api/v1/openapi.json").json()["paths"]["/api/v1/ask"]
            assert client.get("/api/v1/streams", headers={"Host": "evil.example"}).status_code == 421
            assert client.post("/api/v1/ask", content=b"x" * 70_000).status_code == 413
    finally:
        process.terminate()
        assert process.wait(60) == 0


def test_a_page_login_without_api_tokens_leaves_the_api_off(tmp_path):
    login = tmp_path / "login"
    login.write_text("me:a-long-password\n")
    login.chmod(0o600)
    process, base, output = start(tmp_path, "--auth-file", str(login))
    try:
        assert "api off:" in output.read_text() and "--api-tokens-file" in output.read_text()
        with httpx.Client(base_url=base, timeout=30) as client:
            assert client.get("/api/v1/streams").status_code in (401, 404)
    finally:
        process.terminate()
        assert process.wait(60) == 0


def test_next_to_a_page_login_the_api_answers_its_own_tokens_and_the_page_still_wants_its_login(tmp_path):
    """The page's login gate leaves the API's routes to their bearer tokens (no cookie there), while every route
    of the page itself still answers 401 before the login."""
    login = tmp_path / "login"
    login.write_text("me:a-long-password\n")
    login.chmod(0o600)
    tokens = tmp_path / "tokens"
    token = "t0ken-" + "x" * 40
    tokens.write_text(f"{token} read,ask phone\n")
    tokens.chmod(0o600)
    process, base, output = start(tmp_path, "--auth-file", str(login), "--api-tokens-file", str(tokens))
    try:
        assert "api ready" in output.read_text(), output.read_text()[-2000:]
        with httpx.Client(base_url=base, timeout=120) as client:
            assert client.get("/api/v1/streams").status_code == 401  # the API's own refusal: no token
            bearer = {"Authorization": f"Bearer {token}"}
            (stream,) = client.get("/api/v1/streams", headers=bearer).json()
            reply = client.post("/api/v1/ask", json={"question": "What is there?"}, headers=bearer)
            assert reply.status_code == 200 and reply.json()["answers"], reply.text
            assert client.get("/config").status_code == 401  # the page's data still needs the page's login
            assert client.get("/config", headers=bearer).status_code == 401  # an API token is no page login
        assert token not in output.read_text()
    finally:
        process.terminate()
        assert process.wait(60) == 0
