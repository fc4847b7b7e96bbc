"""The API's parts built for one run (the feed, the questions in flight, the runtime watches, who may call) and
its routes, for the page's server (`--ui`: mounted before Gradio's, behind the same guard) or alone (`--api`)."""

from __future__ import annotations

import sys
from dataclasses import dataclass

from fastapi import APIRouter, FastAPI, Request
from fastapi.openapi.utils import get_openapi
from fastapi.responses import JSONResponse
from fastapi.routing import APIRoute
from starlette.middleware import Middleware

from api import ask, events, history, history_day, history_period, openai_chat, streams, watches
from api.asking import Asks
from api.auth import access_for
from api.body_limit import API_PREFIXES, BodyLimit
from api.context import ApiContext, TimelineReads
from api.feed import EventFeed
from api.openai_errors import METHODS, refusal_body
from bus.desk import Desk
from ui.connection_limit import ConnectionLimits
from watches.runtime import RuntimeWatches

OPENAPI_PATH = "/api/v1/openapi.json"
VERSION = "1.0"


class ApiRefused(Exception):
    """The API may not run as asked (beyond loopback without tokens); the message says what to give."""


def page_open_without_login(ui) -> bool:
    """Whether the page would answer without a login (ui.access's rule): no login given, and loopback or --open."""
    return ui.auth is None and (not ui.beyond_loopback or ui.no_login)


@dataclass
class RunningApi:
    """The API of one run: its routes (to mount) and its parts; `close()` unsubscribes them from the bus (the
    runtime watches are the run's, closed with it: app.startup.Running)."""

    context: ApiContext
    routes: list

    def close(self) -> None:
        self.context.desk.bus.unsubscribe(self.context.feed)
        self.context.desk.bus.unsubscribe(self.context.asks)


NEEDS_TOKENS = (
    "the API beyond loopback (or next to a page login) needs tokens: --api-tokens-file FILE (lines TOKEN "
    "SCOPE[,SCOPE...] [NAME], chmod 600) or $EDGE_ASSISTANT_API_TOKENS"
)


def api_refusal(config) -> str | None:
    """Why the API may not run as asked (start_api's ApiRefused), known before anything starts; None: it may."""
    return NEEDS_TOKENS if access_for(config.api.tokens, page_open_without_login(config.ui)) is None else None


def open_api_warning(config) -> str | None:
    """A warning for an API that answers anyone reaching it with every scope (no tokens, --open beyond loopback or
    behind a proxy): said at start, since `manage` lets them add sources and watches. None: no such exposure."""
    ui = config.ui
    if config.api.tokens or not (ui.beyond_loopback or ui.behind_proxy):
        return None
    return (
        "warning: the API answers anyone who reaches this port, with every scope (manage too: streams and watches "
        "added or removed), because of --open without API tokens; give --api-tokens-file FILE to require tokens"
    )


def start_api(
    config, assistant: Desk, options, history: TimelineReads | None, runtime: RuntimeWatches
) -> RunningApi:
    """Builds the API for `assistant` (one box's or a fleet's desk, subscribed to its bus) over the run's runtime
    watches. ApiRefused when no token is given where one is needed."""
    settings = config.api
    access = access_for(settings.tokens, page_open_without_login(config.ui))
    if access is None:
        raise ApiRefused(NEEDS_TOKENS)
    warning = open_api_warning(config)
    if warning:
        print(warning, file=sys.stderr, flush=True)
    feed = EventFeed(replay=settings.replay, queue=settings.sse_queue, max_clients=settings.sse_clients)
    asks = Asks(assistant, per_token=settings.questions_per_token)
    for subscriber in (feed, asks):
        assistant.bus.subscribe(subscriber)
    context = ApiContext(assistant, runtime, feed, asks, access, options, history, settings)
    return RunningApi(context, api_routes(context))


def api_routes(context: ApiContext) -> list:
    """Every route of the API, the schema's own route last."""
    routers: list[APIRouter] = [
        module.router(context)
        for module in (ask, streams, watches, events, history_day, history, history_period, openai_chat)
    ]
    routes = [route for router in routers for route in router.routes]
    schema: dict = {}

    async def openapi() -> dict:
        if not schema:
            schema.update(openapi_schema(routes))
        return schema

    routes.append(APIRoute(OPENAPI_PATH, openapi, methods=["GET"], include_in_schema=False))
    routes.append(unknown_api_route([r for r in routes if isinstance(r, APIRoute) and r.path.startswith("/api/v1/")]))
    return routes


def unknown_api_route(served: list[APIRoute]) -> APIRoute:
    """`/api/v1/{anything}` no route takes as asked: 405 with every method the path is served with in `Allow`
    (Starlette's own 405 names only the first route that matched the path: `Allow: GET` where POST is served too),
    404 naming the routes otherwise. Last among the routes; not in the schema."""
    listed = ", ".join(sorted({r.path for r in served}))

    async def unknown(request: Request) -> JSONResponse:
        path, method = request.url.path, request.method
        allowed = sorted({m for r in served if r.path_regex.match(path) for m in r.methods})
        if allowed:
            message = f"{method} is not served on {path}; it takes {', '.join(allowed)}"
            return JSONResponse({"detail": message}, status_code=405, headers={"Allow": ", ".join(allowed)})
        return JSONResponse({"detail": f"no route {method} {path}; the routes: {listed}"}, status_code=404)

    return APIRoute("/api/v1/{path:path}", unknown, methods=METHODS, include_in_schema=False)


def openapi_schema(routes: list) -> dict:
    return get_openapi(
        title="Edge streaming video assistant",
        version=VERSION,
        description="Ask the cameras, watch for things, follow events, search the history (docs/api.md).",
        routes=routes,
    )


def middleware(rule, throttle, settings, body_timeout_s: float) -> list[Middleware]:
    """The page's guard (Host, Origin, throttled logins; the API's routes check their bearer tokens themselves;
    its refusals under /v1/ are OpenAI's error object) and bounded API bodies (at most --api-max-body-kb, whole
    within `body_timeout_s` seconds: 408 after, with a page login or without)."""
    from ui.guard import PageGuard

    return [
        Middleware(PageGuard, rule=rule, throttle=throttle, bearer_prefixes=API_PREFIXES, refusal_body=refusal_body),
        Middleware(BodyLimit, max_bytes=settings.max_body_kb * 1024, timeout_s=body_timeout_s),
    ]


def headless_app(
    api: RunningApi, rule, throttle, body_timeout_s: float = ConnectionLimits.request_timeout_s
) -> FastAPI:
    """The API alone (`--api`): no page, no docs pages; the schema at /api/v1/openapi.json. `body_timeout_s`: the
    seconds a request body may take to arrive (the page's request timeout)."""
    return FastAPI(
        routes=api.routes,
        middleware=middleware(rule, throttle, api.context.settings, body_timeout_s),
        openapi_url=None,
        docs_url=None,
        redoc_url=None,
    )
