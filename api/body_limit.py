"""Bounded request bodies for the API's paths (ASGI middleware): a larger declared or sent body gets 413 before
a route reads it, a body not whole `timeout_s` after the request began gets 408 and the connection is closed
(`{"detail": ...}`; under /v1/ OpenAI's error object, api.openai_errors)."""

from __future__ import annotations

import asyncio
import json
import time

from api.openai_errors import refusal_body

API_PREFIXES = ("/api/", "/v1/")


async def _refuse(send, path: str, status: int, message: str, close: bool = False) -> None:
    body = json.dumps(refusal_body(path, status, message) or {"detail": message}).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    if close:
        headers.append((b"connection", b"close"))
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


class BodyLimit:
    """`Middleware(BodyLimit, max_bytes=N, timeout_s=T)`: bodies of requests to /api/ and /v1/ are at most N bytes
    and whole within T seconds of the request's start (the page's request timeout, ui.connection_limit): a slow
    body gets 408 and its connection is closed, the route sees a disconnect and what it sends then is dropped."""

    def __init__(self, app, max_bytes: int, timeout_s: float) -> None:
        if not timeout_s > 0:
            raise ValueError(f"timeout_s must be > 0 seconds, got {timeout_s}")
        self.app = app
        self.max_bytes = max_bytes
        self.timeout_s = timeout_s

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] != "http" or not scope["path"].startswith(API_PREFIXES):
            await self.app(scope, receive, send)
            return
        message = f"the request body is larger than {self.max_bytes} bytes (--api-max-body-kb)"
        for key, value in scope.get("headers", ()):
            if key == b"content-length" and (not value.isdigit() or int(value) > self.max_bytes):
                await _refuse(send, scope["path"], 413, message)
                return
        seen = 0
        started = False
        body_done = False
        timed_out = False  # the reply was given here (408, 413): the route's is dropped
        deadline = time.monotonic() + self.timeout_s

        async def counted():
            nonlocal seen, body_done, timed_out
            if body_done:
                return await receive()
            if timed_out:
                return {"type": "http.disconnect"}
            try:
                event = await asyncio.wait_for(receive(), timeout=max(deadline - time.monotonic(), 0.001))
            except TimeoutError:
                timed_out = True
                if not started:
                    late = f"the request body did not arrive within {self.timeout_s:g} s"
                    await _refuse(send, scope["path"], 408, late, close=True)
                return {"type": "http.disconnect"}
            if event["type"] == "http.request":
                seen += len(event.get("body", b""))
                if seen > self.max_bytes:  # a chunked body past the bound: 413 now, the route sees a disconnect
                    timed_out = True  # (the route's own reply is dropped: the 413 was it)
                    if not started:
                        await _refuse(send, scope["path"], 413, message, close=True)
                    return {"type": "http.disconnect"}
            body_done = event["type"] != "http.request" or not event.get("more_body", False)
            return event

        async def watched(event):
            nonlocal started
            if timed_out:
                return  # the 408 (or the cut answer) was the reply
            if event["type"] == "http.response.start":
                started = True
            await send(event)

        await self.app(scope, counted, watched)
