"""The API's port open from the first second of a start (`--api`, alone): until the API is ready every request is
answered 503 with `Retry-After` and what the assistant is doing (loading the model, building the CPU kernels on
a machine's first start, joining the fleet), instead of a refused connection and no word why. Then every request
goes to the API itself. Nothing is read of a request while starting: not its body, not its token."""

from __future__ import annotations

import json
from typing import Any

from api.openai_errors import refusal_body

RETRY_AFTER_S = 5


class StartingApp:
    """An ASGI app answering 503 until `ready(app)`, then `app`. `stage` says what the start is doing now."""

    def __init__(self, stage: str) -> None:
        self.stage = stage
        self.app: Any = None

    def ready(self, app: Any) -> None:
        self.app = app

    def message(self) -> str:
        return f"the assistant is starting ({self.stage}); try again in a few seconds"

    async def __call__(self, scope: dict, receive, send) -> None:
        app = self.app
        if app is not None:
            await app(scope, receive, send)
        elif scope["type"] == "http":
            message = self.message()
            body = refusal_body(scope.get("path", ""), 503, message) or {"detail": message}
            headers = [(b"content-type", b"application/json"), (b"retry-after", str(RETRY_AFTER_S).encode())]
            await send({"type": "http.response.start", "status": 503, "headers": headers})
            await send({"type": "http.response.body", "body": json.dumps(body).encode()})
        elif scope["type"] == "websocket":
            await send({"type": "websocket.close", "code": 1013})  # try again later
