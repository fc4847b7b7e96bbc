"""/api/v1/watches: the yes/no watches (configured ones listed; runtime ones added, changed and removed)."""

from __future__ import annotations

from dataclasses import asdict

from fastapi import APIRouter, Depends, Response

from api.context import ApiContext, refusal
from api.models import BODY_UNREADABLE, WatchAdd, WatchChange, WatchView, refusals
from watches.runtime import Conflict, RuntimeWatch
from watches.spec import WatchSpec

REFUSALS = refusals(401, 403, 404, 409, 422, 429)


def spec_view(spec: WatchSpec, origin: str, runtime: RuntimeWatch | None = None) -> WatchView:
    fields = asdict(spec)
    fields["streams"] = list(spec.streams) if spec.streams is not None else None
    if runtime is None:
        return WatchView(**fields, origin=origin)
    return WatchView(
        **fields,
        origin=origin,
        owner=runtime.owner,
        created=runtime.created,
        expires_at=runtime.expires_at,
        one_shot=runtime.one_shot,
    )


def router(ctx: ApiContext) -> APIRouter:
    api = APIRouter(tags=["watches"])
    manager = Depends(ctx.need("manage"))
    reader = Depends(ctx.need("read"))

    @api.get("/api/v1/watches", response_model=list[WatchView], responses=REFUSALS, summary="Every watch")
    def watches(token=reader):
        configured = [spec_view(s, "config") for s in ctx.watches.configured.values()]
        return configured + [spec_view(w.spec, "runtime", w) for w in ctx.watches.list()]

    @api.post(
        "/api/v1/watches",
        response_model=WatchView,
        status_code=201,
        responses={**REFUSALS, **BODY_UNREADABLE},
        summary="Add a watch",
    )
    def add(body: WatchAdd, token=manager):
        """A "tell me when": its alerts go wherever the configured watches' go (events, MQTT, webhooks,
        timeline). 422 for a bad setting, 404 for an unknown stream, 409 for a name in use, 429 past the limits."""
        settings = asdict(body)
        expires, one_shot = settings.pop("expires_in_s"), settings.pop("one_shot")
        if settings["name"] is None:
            del settings["name"]
        try:
            watch = ctx.watches.add(settings, owner=token.name, expires_in_s=expires, one_shot=one_shot)
        except ValueError as err:
            raise refusal(err) from None
        return spec_view(watch.spec, "runtime", watch)

    @api.get("/api/v1/watches/{name}", response_model=WatchView, responses=REFUSALS, summary="One watch")
    def one(name: str, token=reader):
        if name in ctx.watches.configured:
            return spec_view(ctx.watches.configured[name], "config")
        try:
            watch = ctx.watches.get(name)
        except ValueError as err:
            raise refusal(err) from None
        return spec_view(watch.spec, "runtime", watch)

    def check_owner(name: str, token) -> None:
        """A watch another token set is that token's to change or remove (409); MQTT's (no token) any manager's."""
        try:
            owner = ctx.watches.get(name).owner
        except ValueError:
            return  # not a runtime watch: the change or removal itself says why (404, 409 for a configured one)
        if owner != token.name and owner in {t.name for t in ctx.access.tokens}:
            raise refusal(Conflict(f"watch {name!r} was set by the token {owner!r}; change or remove it with that one"))

    @api.patch(
        "/api/v1/watches/{name}",
        response_model=WatchView,
        responses={**REFUSALS, **BODY_UNREADABLE},
        summary="Change a watch",
    )
    def change(name: str, body: WatchChange, token=manager):
        check_owner(name, token)
        changes = {k: v for k, v in asdict(body).items() if v is not None and k != "never_expires"}
        if body.never_expires:
            changes["expires_in_s"] = None
        try:
            watch = ctx.watches.change(name, changes)
        except ValueError as err:
            raise refusal(err) from None
        return spec_view(watch.spec, "runtime", watch)

    @api.delete("/api/v1/watches/{name}", status_code=204, responses=REFUSALS, summary="Remove a watch")
    def remove(name: str, token=manager):
        check_owner(name, token)
        try:
            ctx.watches.remove(name)
        except ValueError as err:
            raise refusal(err) from None
        return Response(status_code=204)

    return api
