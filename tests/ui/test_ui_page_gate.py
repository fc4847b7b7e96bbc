"""The page's gate on a real Gradio server started by the app's own `launch_page` on 127.0.0.1 (a small page with
the same kinds of parts: a private event and a gr.State): foreign Host names and Origins refused, the login
required on every API route when set, failed logins throttled per client, session state bounded."""

from __future__ import annotations

import json

import gradio as gr
import httpx
import pytest

from app.config import UIConfig
from app.web import MAX_PAGE_SESSIONS, launch_page
from tests.support.harden_page_helpers import Clock, free_port
from ui.access import PageLogin, page_login
from ui.login_throttle import LoginThrottle


def small_page() -> gr.Blocks:
    with gr.Blocks() as page:
        seen = gr.State({"shown": 0})
        text = gr.Textbox()
        out = gr.Textbox()
        text.submit(lambda x, s: (x.upper(), {"shown": s["shown"] + 1}), [text, seen], [out, seen], api_name="up")
        secret = gr.Button()
        secret.click(lambda: "history rows", None, [out], api_visibility="private")
    page.queue()
    return page


@pytest.fixture
def served(request):
    """(base URL, page, clock) of a page served with the login `request.param` (None: no login)."""
    login = getattr(request, "param", None)
    clock = Clock()
    page = small_page()
    port = free_port()
    launch_page(page, UIConfig(port=port), login, throttle=LoginThrottle(free=3, first_lock_s=10.0, clock=clock))
    try:
        yield f"http://127.0.0.1:{port}", page, clock
    finally:
        page.close()


def call(client: httpx.Client, base: str, index: int, data: list, session: str) -> dict:
    """One API call the way the page makes it (queue/join, then its event stream); the completed message."""
    joined = client.post(
        f"{base}/gradio_api/queue/join", json={"data": data, "fn_index": index, "session_hash": session}
    )
    assert joined.status_code == 200, joined.text
    with client.stream("GET", f"{base}/gradio_api/queue/data", params={"session_hash": session}, timeout=30) as resp:
        for line in resp.iter_lines():
            if line.startswith("data:"):
                message = json.loads(line[5:])
                if message.get("msg") == "process_completed":
                    return message
    raise AssertionError("the event stream ended before the call completed")


def login(client: httpx.Client, base: str, password: str) -> int:
    return client.post(f"{base}/login", data={"username": "ann", "password": password}).status_code


def test_a_foreign_host_name_is_refused_before_gradio(served):
    base, _, _ = served
    assert httpx.get(f"{base}/config").status_code == 200
    for host in ("localhost:1", "127.0.0.1", "[::1]:7860", "192.168.1.20:7860", "view.localhost"):
        assert httpx.get(f"{base}/config", headers={"Host": host}).status_code == 200, host
    for host in ("evil.example", "evil.example:7860", "127.0.0.1.evil.example", "localhost.evil.example"):
        refused = httpx.get(f"{base}/config", headers={"Host": host})
        assert refused.status_code == 421, host
        assert "allowed-host" in refused.text and "components" not in refused.text


def test_an_allowed_host_name_is_served(tmp_path):
    page = small_page()
    port = free_port()
    launch_page(page, UIConfig(port=port, allowed_hosts=("Box.Lan",), no_login=True), None)
    try:
        base = f"http://127.0.0.1:{port}"
        assert httpx.get(f"{base}/config", headers={"Host": f"box.lan:{port}"}).status_code == 200
        assert httpx.get(f"{base}/config", headers={"Host": "other.lan"}).status_code == 421
    finally:
        page.close()


def test_a_request_from_another_site_is_refused(served):
    base, page, _ = served
    index = next(iter(page.fns))
    body = {"data": ["a", None], "fn_index": index, "session_hash": "x1"}
    host = base.removeprefix("http://")
    own = httpx.post(f"{base}/gradio_api/queue/join", json=body, headers={"Origin": base})
    assert own.status_code == 200, own.text
    for origin in ("http://evil.example", "null", f"http://127.0.0.1:{int(host.split(':')[1]) + 1}"):
        refused = httpx.post(f"{base}/gradio_api/queue/join", json=body, headers={"Origin": origin})
        assert refused.status_code == 403, origin


PREFLIGHT = {"Access-Control-Request-Method": "POST", "Access-Control-Request-Headers": "content-type"}


def test_a_preflight_from_another_local_port_gets_no_cors_grant(served):
    # Gradio's own CORS middleware once answered a localhost:OTHER-PORT preflight with credentials allowed: a page
    # of another local program (or user) could then call the assistant with the browser's login cookie.
    base, _, _ = served
    port = int(base.rsplit(":", 1)[1])
    for host in ("localhost", "127.0.0.1"):
        headers = {"Host": f"{host}:{port}", "Origin": f"http://{host}:{port + 1}", **PREFLIGHT}
        preflight = httpx.options(f"{base}/gradio_api/queue/join", headers=headers)
        assert preflight.status_code == 403, (host, preflight.status_code, dict(preflight.headers))
        assert not any(k.lower().startswith("access-control-allow") for k in preflight.headers), preflight.headers
    own = httpx.options(f"{base}/gradio_api/queue/join", headers={"Origin": base, **PREFLIGHT})
    assert own.status_code != 403  # the page's own origin is not refused


@pytest.mark.parametrize("served", [PageLogin("ann", "right-password")], indirect=True)
def test_with_a_login_every_endpoint_private_ones_too_needs_it(served):
    base, page, _ = served
    private = next(i for i, fn in page.fns.items() if fn.api_visibility == "private" and fn.fn is not None)
    with httpx.Client() as anonymous:
        assert anonymous.get(f"{base}/config").status_code == 401
        body = {"data": [], "fn_index": private, "session_hash": "anon"}
        assert anonymous.post(f"{base}/gradio_api/queue/join", json=body).status_code == 401
        assert anonymous.post(f"{base}/gradio_api/call/up", json={"data": ["a"]}).status_code == 401
    with httpx.Client() as person:
        assert login(person, base, "right-password") == 200
        assert person.get(f"{base}/config").status_code == 200
        assert call(person, base, private, [], "mine")["output"]["data"] == ["history rows"]


@pytest.mark.parametrize("served", [PageLogin("ann", "right-password")], indirect=True)
def test_failed_logins_lock_the_client_out_for_a_growing_time(served):
    base, _, clock = served
    with httpx.Client() as client:
        assert [login(client, base, f"guess-{i}") for i in range(3)] == [400, 400, 400]
        locked = client.post(f"{base}/login", data={"username": "ann", "password": "right-password"})
        assert locked.status_code == 429 and "try again" in locked.text  # the right password, during the lock
        clock.now += 11  # the first lock: 10 s
        assert login(client, base, "guess-again") == 400  # one more failure: locked again, for twice as long
        clock.now += 11
        assert login(client, base, "right-password") == 429
        clock.now += 10
        assert login(client, base, "right-password") == 200
        assert login(client, base, "guess-after-success") == 400  # a success starts the count afresh


def test_anonymous_api_calls_keep_a_bounded_number_of_sessions(served):
    base, page, _ = served
    index = next(i for i, fn in page.fns.items() if fn.api_visibility == "public")
    calls = MAX_PAGE_SESSIONS + 40
    with httpx.Client() as client:
        for n in range(calls):
            assert call(client, base, index, [f"q{n}", None], f"session-{n}")["output"]["data"][0] == f"Q{n}"
    stored = page.server_app.state_holder.session_data
    assert 0 < len(stored) <= MAX_PAGE_SESSIONS
    assert "session-0" not in stored and f"session-{calls - 1}" in stored  # the least recent went first


def test_a_generated_login_is_the_one_the_page_asks_for():
    generated = page_login(None, beyond_loopback=True, no_login=False)  # what a page beyond loopback gets
    page = small_page()
    port = free_port()
    launch_page(page, UIConfig(port=port), generated)
    try:
        base = f"http://127.0.0.1:{port}"
        assert httpx.get(f"{base}/config").status_code == 401
        with httpx.Client() as person:
            sent = {"username": generated.user, "password": generated.password}
            assert person.post(f"{base}/login", data=sent).status_code == 200
            assert person.get(f"{base}/config").status_code == 200
    finally:
        page.close()
