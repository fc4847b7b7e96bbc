"""The page on the head of a fleet, on a real Ray cluster of two host nodes on this machine
(tests/support/ray_cluster.py):
`python -m app --ray ADDRESS --ui --model tiny --stream a=... --stream b=...` driven by headless chromium
(tests/ui_browser/fleet_test.js). Each stream's panel shows frames from its host and the host it runs on (the one
the coordinator placed it on: the event log says), and a question asked on the page for stream b is routed to b's
host and answered there; Start, Stop, Reset memory and the standing question's editor are not on the page (the
fleet cannot do them) while asking, adding and removing are; Remove stream takes b off its host (its panel then says
removed). The app is stopped with SIGINT, whatever happened; the cluster is the session's.
The screenshot is kept in artifacts/ui-test/fleet.png (failure.png when a check failed)."""

from __future__ import annotations

import pytest

from bus import Answer, ClipEvent, Status, StatusKind
from tests.support.app_helpers import read_log, video
from tests.ui.test_ui_browser import AppProcess, browser, free_port, run_page_script

__all__ = ["browser"]  # the fixture: a missing browser fails (or skips) before the cluster starts

pytest.importorskip("ray")

WAIT_S = 240  # bound on the start (two hosts load the tiny model) and on the page's checks


def test_the_page_on_the_head_shows_each_stream_with_its_host_and_routes_a_question(
    browser, shared_ray_cluster, tmp_path
):
    clip = video(20)
    log = tmp_path / "events.jsonl"
    port = free_port()
    app = AppProcess(
        ["--ray", shared_ray_cluster.address, "--ui", "--port", str(port), "--model", "tiny", "--stream", f"a={clip}"]
        + ["--stream", f"b={clip}", "--loop", "--every", "0", "--budget", "256", "--max-new-tokens", "8"]
        + ["--log-jsonl", str(log)]
    )
    try:
        app.wait_ready(WAIT_S)
        url = f"http://127.0.0.1:{port}/"
        seen = run_page_script("fleet_test.js", url, tmp_path, [], app, ["fleet.png"], timeout=WAIT_S)
    finally:
        code = app.interrupt(timeout=60)
    assert code == 0 and "Traceback" not in app.output, app.output
    events = read_log(log)
    placed = {e.stream: e.host for e in events if isinstance(e, Status) and e.kind is StatusKind.STREAM_PLACED}
    assert placed == {"a": seen["host_a"], "b": seen["host_b"]}  # the page shows where the coordinator put them
    assert placed["a"] != placed["b"] and {placed["a"][:2], placed["b"][:2]} == {"a-", "b-"}  # one on each node
    answers = [e for e in events if isinstance(e, Answer) and e.question == "Which stream is this?"]
    assert [e.stream for e in answers] == ["b"]
    assert seen["inPlaceShown"] == [] and "remove-stream" in seen["fleetShown"]
    gone = [i for i, e in enumerate(events) if isinstance(e, Status) and e.kind is StatusKind.STREAM_REMOVED]
    assert [events[i].stream for i in gone] == ["b"]  # from its host (b was its only stream)
    assert not [e for e in events[gone[0] :] if isinstance(e, ClipEvent) and e.stream == "b"]
