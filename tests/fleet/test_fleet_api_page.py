"""The HTTP API beside the fleet's page: `python -m app --ray ADDRESS --ui --model tiny --stream a=... --stream b=...`
on a real Ray cluster of two host nodes on this machine (the session's) serves the page and, on the same port,
/api/v1 and /v1 for the whole fleet (loopback without a page login: no token needed, as on one box). A question
over HTTP is answered by its stream's host and the events feed brings every host's events. Stopped with SIGINT,
whatever happened."""

from __future__ import annotations

import json
import time

import httpx
import pytest

from tests.support.app_helpers import video
from tests.ui.test_ui_browser import AppProcess, free_port

pytest.importorskip("ray")

WAIT_S = 240  # bound on the start (two hosts load the tiny model) and on each request


def test_the_fleets_page_serves_the_api_for_every_host(shared_ray_cluster, tmp_path):
    clip = video(20)
    port = free_port()
    app = AppProcess(
        ["--ray", shared_ray_cluster.address, "--ui", "--port", str(port), "--model", "tiny", "--stream", f"a={clip}"]
        + ["--stream", f"b={clip}", "--loop", "--every", "0", "--budget", "256", "--max-new-tokens", "6"]
        + ["--timeline", str(tmp_path / "timeline.sqlite"), "--api-answer-timeout", str(WAIT_S)]
    )
    try:
        app.wait_ready(WAIT_S)
        with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=WAIT_S) as client:
            assert client.get("/").status_code == 200  # the page
            hosts = placed(client)
            reply = client.post("/api/v1/ask", json={"question": "What is there?", "stream": "b"})
            assert reply.status_code == 200, reply.text
            (answer,) = reply.json()["answers"]
            assert answer["stream"] == "b" and isinstance(answer["evidence"], list)
            streams = feed_streams(client)
    finally:
        code = app.interrupt(timeout=90)
    assert code == 0 and "Traceback" not in app.output, app.output
    assert "api ready:" in app.output
    assert hosts["a"] != hosts["b"] and {hosts["a"][:2], hosts["b"][:2]} == {"a-", "b-"}
    assert streams == {"a", "b"}  # each host's clips reach the feed on the head


def placed(client) -> dict[str, str]:
    deadline = time.monotonic() + WAIT_S
    while True:
        views = client.get("/api/v1/streams").json()
        hosts = {s["name"]: s["host"] for s in views}
        if set(hosts) == {"a", "b"} and all(hosts.values()):
            return hosts
        assert time.monotonic() < deadline, f"streams not placed: {views}"
        time.sleep(0.5)


def feed_streams(client) -> set[str]:
    """The streams of the feed's clip events, until both streams were seen (bounded in time)."""
    seen: set[str] = set()
    deadline = time.monotonic() + WAIT_S
    with client.stream("GET", "/api/v1/events?types=clip") as feed:
        assert feed.status_code == 200
        for line in feed.iter_lines():
            if line.startswith("data: "):
                seen.add(json.loads(line[6:])["stream"])
            if seen == {"a", "b"} or time.monotonic() > deadline:
                break
    return seen
