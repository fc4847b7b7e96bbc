"""Where no token is needed (loopback, no page login), each connection has its own budget of waiting questions
(--api-questions-per-token): one local program's questions never hold another's back, and the assistant's own
bound (--max-pending-questions) still holds them all. With tokens the budget stays the token's, whatever the
connection. The routes (POST /api/v1/ask, /v1/chat/completions) against a silent stand-in assistant."""

from __future__ import annotations

import pytest
from starlette.testclient import TestClient

from api.asking import Asks
from api.auth import LOCAL, Access, parse_tokens, question_owner
from api.config import ApiConfig
from api.context import ApiContext
from api.feed import EventFeed
from api.server import RunningApi, api_routes, headless_app
from tests.api.test_openai_chat import ASKER, Camera
from ui.guard import HostRule
from ui.login_throttle import LoginThrottle


class Recording(Asks):
    """Asks that notes whose budget each question was counted against."""

    def __init__(self, assistant, per_token: int) -> None:
        super().__init__(assistant, per_token)
        self.owners: list[str] = []

    def open(self, loop, question, stream, owner):
        self.owners.append(owner)
        return super().open(loop, question, stream, owner)


def app_with(access: Access) -> tuple[object, Recording]:
    camera = Camera()
    asks = Recording(camera, per_token=1)
    camera.bus.subscribe(asks)
    feed = EventFeed(replay=10, queue=10, max_clients=2)
    context = ApiContext(camera, None, feed, asks, access, None, None, ApiConfig(answer_timeout_s=5))
    return headless_app(RunningApi(context, api_routes(context)), HostRule("127.0.0.1"), LoginThrottle()), asks


def test_the_budget_of_a_tokenless_caller_is_its_connections():
    assert question_owner(LOCAL, ("127.0.0.1", 40001)) != question_owner(LOCAL, ("127.0.0.1", 40002))
    tokens = parse_tokens(f"{ASKER} ask phone", "test")
    assert question_owner(tokens[0], ("127.0.0.1", 40001)) == question_owner(tokens[0], ("127.0.0.1", 40002))


@pytest.mark.parametrize("anonymous", [True, False])
def test_each_loopback_connection_asks_on_its_own_budget_and_a_token_on_its_tokens(anonymous):
    access = Access(anonymous=True) if anonymous else Access(parse_tokens(f"{ASKER} ask phone", "test"))
    app, asks = app_with(access)
    headers = {"Authorization": f"Bearer {ASKER}"}
    for port in (40001, 40002):
        with TestClient(app, base_url="http://127.0.0.1", client=("127.0.0.1", port), headers=headers) as client:
            assert client.post("/api/v1/ask", json={"question": "Who is there?"}).status_code == 200
            chat = {"model": "door", "messages": [{"role": "user", "content": "And now?"}]}
            assert client.post("/v1/chat/completions", json=chat).status_code == 200
    first, second = asks.owners[0::2], asks.owners[1::2]
    assert len(asks.owners) == 4 and first == second  # the same connection's two questions: one budget
    assert (len(set(asks.owners)) == 2) is anonymous  # two connections: two budgets without tokens, one with
