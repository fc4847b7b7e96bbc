"""The API alone listens from the first second of a start (api/starting.py): until it is ready every request is
answered 503 with Retry-After and what the start is doing, in the API's shape (OpenAI's error object under /v1/),
without a token; then the same port serves the API itself. A live uvicorn server on 127.0.0.1 (app.serve_api's own
open_port); the real `python -m app --api` listening before it is ready: tests/api/test_api_server.py."""

from __future__ import annotations

import httpx

from app.config import UIConfig
from app.serve_api import open_port
from tests.api.test_api_connections import running_api
from tests.api.test_api_requests import ADMIN
from tests.support.harden_page_helpers import free_port


def test_the_port_answers_503_with_what_it_is_doing_until_the_api_is_ready():
    listening = open_port(UIConfig(port=free_port()), "loading the model")
    try:
        with httpx.Client(base_url=f"http://127.0.0.1:{listening.port}", timeout=10) as client:
            early = client.get("/api/v1/streams")
            assert early.status_code == 503 and early.headers["retry-after"] == "5"
            assert early.json() == {
                "detail": "the assistant is starting (loading the model); try again in a few seconds"
            }
            chat = client.post("/v1/chat/completions", json={"model": "door", "messages": []})
            assert chat.status_code == 503 and "loading the model" in chat.json()["error"]["message"]
            listening.starting.stage = "starting the streams"
            assert "starting the streams" in client.get("/").json()["detail"]
            listening.ready(running_api())
            ready = client.get("/v1/models", headers={"Authorization": f"Bearer {ADMIN}"})
            assert ready.status_code == 200 and ready.json()["object"] == "list"
            assert client.get("/v1/models").status_code == 401  # the API's own rules from now on
    finally:
        listening.close()

