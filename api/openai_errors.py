"""OpenAI's error object for every refusal on `/v1/*`: the HTTP status, and the body
`{"error": {"message": str, "type": str, "param": str | null, "code": str | null}}`, so OpenAI's clients show
why (the `openai` package raises `BadRequestError`, `NotFoundError`, ... carrying `message`, `param`, `code`).
`/api/v1/*` keeps its own `{"detail": ...}` (api.models.Problem).

The routes under /v1 are `OpenAIRoute`s: whatever they raise (an HTTPException of the checks they share with
`/api/v1`: tokens and scopes, limits, the question's length; FastAPI's request-validation error) leaves as that
object. A path under /v1 that no route serves gets it too (`unknown_route`: 404, or 405 naming the methods), and
the middlewares in front (bounded bodies, the page's guard) take their bodies from `refusal_body`.

type by status: 401 authentication_error, 403 permission_error, 404 not_found_error, 429 rate_limit_exceeded,
504 timeout_error, other 5xx server_error, other 4xx invalid_request_error.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

from fastapi import HTTPException, Request
from fastapi.dependencies.utils import get_flat_params
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from fastapi.routing import APIRoute
from starlette.exceptions import HTTPException as StarletteHTTPException

PREFIX = "/v1/"
TYPES = {401: "authentication_error", 403: "permission_error", 404: "not_found_error", 429: "rate_limit_exceeded"}
CODES = {401: "invalid_api_key", 429: "rate_limit_exceeded", 504: "timeout"}  # when the refusal names none
METHODS = ["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"]


@dataclass
class ErrorDetail:
    """message: why, and what to do. type: the kind of refusal (by status). param: the request's parameter it
    is about (`n`, `tools`, `messages[2].content`, ...). code: a stable name of the reason, where there is one.
    Each is always sent (param and code null where they say nothing)."""

    message: str
    type: str
    param: str | None
    code: str | None


@dataclass
class ErrorResponse:
    """Every refusal on /v1/*: its HTTP status says what kind, `error` says why (OpenAI's error object)."""

    error: ErrorDetail


def error_type(status: int) -> str:
    if status in TYPES:
        return TYPES[status]
    if status == 504:
        return "timeout_error"
    return "server_error" if status >= 500 else "invalid_request_error"


def error_record(status: int, message: str, param: str | None = None, code: str | None = None) -> dict[str, Any]:
    """The body of a refusal: {"error": {message, type, param, code}}."""
    return {"error": asdict(ErrorDetail(message, error_type(status), param, code or CODES.get(status)))}


def error_response(
    status: int,
    message: str,
    param: str | None = None,
    code: str | None = None,
    headers: dict[str, str] | None = None,
) -> JSONResponse:
    return JSONResponse(error_record(status, message, param, code), status_code=status, headers=headers)


def refusal_body(path: str, status: int, message: str) -> dict[str, Any] | None:
    """The body a middleware refuses a request for `path` with: OpenAI's error object under /v1/, None elsewhere
    (the middleware's own)."""
    return error_record(status, message) if path.startswith(PREFIX) else None


def error_responses(*statuses: int) -> dict[int | str, dict[str, Any]]:
    """The schema's refusals of a /v1 route: each status with the error object."""
    return {status: {"model": ErrorResponse, "description": error_type(status)} for status in statuses}


class OpenAIError(HTTPException):
    """A refusal that names the request's parameter (`param`) and the reason's `code`."""

    def __init__(
        self,
        status: int,
        message: str,
        param: str | None = None,
        code: str | None = None,
        headers: dict[str, str] | None = None,
    ) -> None:
        super().__init__(status, message, headers=headers)
        self.param, self.code = param, code


def _where(loc: Sequence[Any]) -> str | None:
    """A validation error's location as a parameter: ("body", "messages", 0, "role") -> "messages[0].role"."""
    parts = list(loc[1:] if loc and loc[0] in ("body", "path", "query", "header") else loc)
    text = ""
    for part in parts:
        text += f"[{part}]" if isinstance(part, int) else (f".{part}" if text else str(part))
    return text or None


def validation_response(err: RequestValidationError) -> JSONResponse:
    """FastAPI's request-validation error (422: malformed JSON, a missing field, a wrong type) as the error
    object: `param` is where the first problem is, the message lists the first few."""
    problems = list(err.errors())
    said = []
    for problem in problems[:3]:
        where = _where(problem.get("loc", ()))
        why = problem.get("msg", "invalid")
        if problem.get("type") == "json_invalid":
            why = f"the body is not JSON ({(problem.get('ctx') or {}).get('error', 'cannot be parsed')})"
            where = None
        said.append(f"{where}: {why}" if where else why)
    first = problems[0] if problems else {}
    param = None if first.get("type") == "json_invalid" else _where(first.get("loc", ()))
    return error_response(422, "; ".join(said) or "invalid request", param)


class OpenAIRoute(APIRoute):
    """A route whose refusals are OpenAI's error object (`APIRouter(route_class=OpenAIRoute)`); its request's
    validation errors (where it takes parameters or a body) are documented as that too."""

    def __init__(self, path: str, endpoint, *, responses: dict | None = None, **kwargs) -> None:
        given = dict(responses or {})
        super().__init__(path, endpoint, responses={**error_responses(422), **given}, **kwargs)
        if 422 not in given and not (get_flat_params(self.dependant) or self.body_field):
            self.responses.pop(422)  # nothing to validate: never sent

    def get_route_handler(self):
        handler = super().get_route_handler()

        async def answer(request: Request):
            try:
                return await handler(request)
            except StarletteHTTPException as err:
                param, code = getattr(err, "param", None), getattr(err, "code", None)
                return error_response(err.status_code, str(err.detail), param, code, err.headers)
            except RequestValidationError as err:
                return validation_response(err)

        return answer


def unknown_route(served: Sequence[APIRoute]) -> APIRoute:
    """`/v1/{anything}` not served by `served` (the /v1 routes): 405 naming the methods where the path is served
    with others, 404 naming the routes otherwise. Last among the routes; not in the schema."""
    listed = ", ".join(f"{sorted(r.methods)[0]} {r.path}" for r in served)

    async def unknown(request: Request) -> JSONResponse:
        path, method = request.url.path, request.method
        allowed = sorted({m for r in served if r.path_regex.match(path) for m in r.methods})
        if allowed:
            message = f"{method} is not served on {path}; it takes {', '.join(allowed)}"
            return error_response(405, message, code="method_not_allowed", headers={"Allow": ", ".join(allowed)})
        return error_response(404, f"no route {method} {path}; the routes: {listed}", code="unknown_url")

    return APIRoute("/v1/{path:path}", unknown, methods=METHODS, include_in_schema=False)
