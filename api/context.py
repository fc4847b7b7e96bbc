"""What every route needs: the running assistant's desk (bus.desk: one box's or a fleet's), the timeline's reads
and the API's parts, who may call (scopes), and how a refusal becomes an HTTP status with a JSON `detail`."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol

from fastapi import HTTPException, Security
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from api.asking import Asks, TooManyAsks
from api.auth import Access, ApiToken, AuthError
from api.config import ApiConfig
from api.feed import EventFeed, FeedFull
from bus.desk import Desk
from bus.refusals import AdmissionError, AssistantBusy
from capture import SourceError
from capture.options import CaptureOptions
from capture.policy import SourceRefused
from timeline.day import Day
from timeline.period import Period
from timeline.reader import Moment
from timeline.recap import Recap
from timeline.summary import Summary
from watches.runtime import Conflict, NotFound, RuntimeWatches, TooMany

BEARER = HTTPBearer(auto_error=False, description="an API token (--api-tokens-file); scopes: read, ask, manage")
BEARER_CREDENTIALS = Security(BEARER)


class TimelineReads(Protocol):
    """What the routes read of the timeline (app.front_door.TimelineHistory: each call opens it read-only). Each
    may raise `ui.history.HistoryUnavailable`. keep_days: how far back a period may reach (None: not known)."""

    keep_days: float | None

    def search(self, text: str | None, since_s: float | None, stream: str | None, limit: int) -> Sequence[Moment]:
        ...

    def thumbnail(self, row_id: int) -> bytes | None:
        ...

    def summary(self, span: Period, **options) -> Summary:
        ...

    def recap(self, span: Period, **options) -> Recap:
        ...

    def day(self, span: Period, **options) -> Day:
        ...

    def names(self) -> tuple[list[str], list[tuple[str, str]]]:
        ...


@dataclass
class ApiContext:
    """desk: the running assistant, one box or a fleet (bus.desk). history: None when the timeline is off."""

    desk: Desk
    watches: RuntimeWatches
    feed: EventFeed
    asks: Asks
    access: Access
    options: CaptureOptions
    history: TimelineReads | None
    settings: ApiConfig

    def need(self, scope: str) -> Callable[..., ApiToken]:
        """A dependency: the caller's token, which must hold `scope` (401 without a valid one, 403 without it)."""

        def check(credentials: HTTPAuthorizationCredentials | None = BEARER_CREDENTIALS) -> ApiToken:
            header = None if credentials is None else f"{credentials.scheme} {credentials.credentials}"
            try:
                return self.access.check(header, scope)
            except AuthError as err:
                headers = {"WWW-Authenticate": "Bearer"} if err.status == 401 else None
                raise HTTPException(err.status, str(err), headers=headers) from None

        return check

    def stream_named(self, name: str | None) -> str | None:
        """`name` when such a stream runs (None: every stream); 404 otherwise."""
        streams = self.desk.desk_streams()
        if name is not None and name not in streams:
            known = ", ".join(streams)
            raise HTTPException(404, f"no stream named {name!r}; streams: {known}")
        return name


def refusal(err: Exception) -> HTTPException:
    """The HTTP status of a refusal from the assistant or its parts."""
    if isinstance(err, NotFound):
        return HTTPException(404, str(err))
    if isinstance(err, Conflict):
        return HTTPException(409, str(err))
    if isinstance(err, (TooMany, TooManyAsks, AssistantBusy, FeedFull)):
        return HTTPException(429, str(err), headers={"Retry-After": "5"})
    if isinstance(err, SourceRefused):
        return HTTPException(403, str(err))
    if isinstance(err, AdmissionError):
        return HTTPException(507, str(err))
    if isinstance(err, (SourceError, ValueError)):
        return HTTPException(422, str(err))
    raise err
