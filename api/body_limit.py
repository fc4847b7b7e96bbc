"""Bounded request bodies for the API's paths (ASGI middleware): a larger declared or sent body gets 413 before
a route reads it (`{"detail": ...}`; under /v1/ OpenAI's error object, api.openai_errors)."""

from __future__ import annotations

import json

from api.openai_errors import refusal_body

API_PREFIXES = ("/api/", "/v1/")


class BodyTooLarge(Exception):
    pass


async def _refuse(send, path: str, status: int, message: str) -> None:
    body = json.dumps(refusal_body(path, status, message) or {"detail": message}).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


class BodyLimit:
    """`Middleware(BodyLimit, max_bytes=N)`: bodies of requests to /api/ and /v1/ are at most N bytes."""

    def __init__(self, app, max_bytes: int) -> None:
        self.app = app
        self.max_bytes = max_bytes

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

        async def counted():
            nonlocal seen
            event = await receive()
            if event["type"] == "http.request":
                seen += len(event.get("body", b""))
                if seen > self.max_bytes:
                    raise BodyTooLarge
            return event

        async def watched(event):
            nonlocal started
            if event["type"] == "http.response.start":
                started = True
            await send(event)

        try:
            await self.app(scope, counted, watched)
        except BodyTooLarge:
            if not started:
                await _refuse(send, scope["path"], 413, message)
