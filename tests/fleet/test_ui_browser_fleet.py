"""The page on the head of a fleet, on a real Ray cluster of two host nodes on this machine (the session's,
tests/support/ray_cluster.py): `python -m app --ray ADDRESS --ui --model tiny --stream a=... --stream b=...`, one
head for the module (its data folder its own), stopped with SIGINT whatever happened; it must exit 0 without a
traceback, having said `api ready`.
- Beside the page, on the same port, it serves /api/v1 and /v1 for the whole fleet (loopback without a page login:
  no token needed, as on one box): a question over HTTP is answered by its stream's host and the events feed brings
  every host's events.
- Driven by headless chromium (tests/ui_browser/fleet_test.js): each stream's panel shows frames from its host and
  the host it runs on (the one the coordinator placed it on: the event log says), and a question asked on the page
  for stream b is routed to b's host and answered there; Start, Stop, Reset memory and the standing question's
  editor are not on the page (the fleet cannot do them) while asking, adding and removing are; Remove stream takes b
  off its host (its panel then says removed). This test is the head's last user: it stops it, then reads the log.
The screenshot is kept in artifacts/ui-test/fleet.png (failure.png when a check failed)."""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from bus import Answer, ClipEvent, Status, StatusKind
from tests.support.app_helpers import read_log, video
from tests.support.ray_cluster import lease_for
from tests.ui.test_ui_browser import AppProcess, browser, free_port, run_page_script
from timeline.config import DATA_ENV

__all__ = ["browser"]  # the fixture: a missing browser fails (or skips) before the page's test

pytest.importorskip("ray")

WAIT_S = 240  # bound on the start (two hosts load the tiny model), on each request and on the page's checks


@dataclass
class FleetPage:
    app: AppProcess
    port: int
    log: Path
    code: int | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def stop(self) -> int:
        """SIGINT once; the exit code."""
        if self.code is None:
            self.code = self.app.interrupt(timeout=90)
        return self.code


@pytest.fixture(scope="module")
def fleet_page(tmp_path_factory, shared_ray_cluster_pool, request):
    tmp = tmp_path_factory.mktemp("fleet-page")
    clip = video(20)
    log, port = tmp / "events.jsonl", free_port()
    with lease_for(shared_ray_cluster_pool, request, tmp / "data") as cluster, pytest.MonkeyPatch.context() as mp:
        mp.setenv(DATA_ENV, str(tmp / "data"))  # the head's environment (copied as it starts)
        app = AppProcess(
            ["--ray", cluster.address, "--ui", "--port", str(port), "--model", "tiny", "--stream", f"a={clip}"]
            + ["--stream", f"b={clip}", "--loop", "--every", "0", "--budget", "256", "--max-new-tokens", "8"]
            + ["--timeline", str(tmp / "timeline.sqlite"), "--api-answer-timeout", str(WAIT_S)]
            + ["--log-jsonl", str(log)]
        )
        page = FleetPage(app, port, log)
        try:
            app.wait_ready(WAIT_S)
            yield page
        finally:
            code = page.stop()
    assert code == 0 and "Traceback" not in app.output, app.output
    assert "api ready:" in app.output


def test_the_fleets_page_serves_the_api_for_every_host(fleet_page):
    with httpx.Client(base_url=fleet_page.url, timeout=WAIT_S) as client:
        assert client.get("/").status_code == 200  # the page
        hosts = placed(client)
        reply = client.post("/api/v1/ask", json={"question": "What is there?", "stream": "b"})
        assert reply.status_code == 200, reply.text
        (answer,) = reply.json()["answers"]
        assert answer["stream"] == "b" and isinstance(answer["evidence"], list)
        streams = feed_streams(client)
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


def test_the_page_on_the_head_shows_each_stream_with_its_host_and_routes_a_question(browser, fleet_page, tmp_path):
    try:
        seen = run_page_script("fleet_test.js", fleet_page.url + "/", tmp_path, [], fleet_page.app, ["fleet.png"],
                               timeout=WAIT_S)  # fmt: skip
    finally:
        code = fleet_page.stop()  # the head's last user
    assert code == 0 and "Traceback" not in fleet_page.app.output, fleet_page.app.output
    events = read_log(fleet_page.log)
    placed = {e.stream: e.host for e in events if isinstance(e, Status) and e.kind is StatusKind.STREAM_PLACED}
    assert placed == {"a": seen["host_a"], "b": seen["host_b"]}  # the page shows where the coordinator put them
    assert placed["a"] != placed["b"] and {placed["a"][:2], placed["b"][:2]} == {"a-", "b-"}  # one on each node
    answers = [e for e in events if isinstance(e, Answer) and e.question == "Which stream is this?"]
    assert [e.stream for e in answers] == ["b"]
    assert seen["inPlaceShown"] == [] and "remove-stream" in seen["fleetShown"]
    gone = [i for i, e in enumerate(events) if isinstance(e, Status) and e.kind is StatusKind.STREAM_REMOVED]
    assert [events[i].stream for i in gone] == ["b"]  # from its host (b was its only stream)
    assert not [e for e in events[gone[0] :] if isinstance(e, ClipEvent) and e.stream == "b"]
