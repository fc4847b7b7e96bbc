"""`python -m app --ray ADDRESS --api`: the fleet's head serves the HTTP API alone (headless, for a service). The
head joins the cluster and starts the coordinator as its terminal and its page do (fleet/head.py); the API
(fleet/head_api.py) routes each request to the host of its stream, on --host/--port, until Ctrl-C (or
SIGTERM) or the fleet's run ends. Exit code 0 on a normal shutdown, 2 when the fleet or the API cannot start."""

from __future__ import annotations

import sys

from api.server import ApiRefused, api_refusal
from app.config import AppConfig
from app.serve_api import Listening, open_port, serve_until
from app.signals import SignalStop, StopRequested, run_stoppable
from app.startup import StartupError, fail
from fleet.head import start_head
from fleet.head_api import HeadApi, start_head_api


def serve_fleet_api(config: AppConfig) -> int:
    return run_stoppable(lambda signals: _serve(config, signals), "the API was served")


def _serve(config: AppConfig, signals: SignalStop) -> int:
    ui = config.ui
    assert ui is not None and config.fleet is not None, "serve_fleet_api needs --api and --ray"
    refused = api_refusal(config)
    if refused:
        return fail(refused)
    try:  # the port first: 503 and what is going on until the API is ready (api/starting.py)
        listening = open_port(ui, "joining the fleet and placing its streams")
    except StartupError as err:
        return fail(str(err))
    try:
        return _serve_on(config, signals, listening)
    finally:
        listening.close()


def _serve_on(config: AppConfig, signals: SignalStop, listening: Listening) -> int:
    try:
        head = start_head(config)
    except StartupError as err:
        return fail(str(err))
    coordinator = head.coordinator
    assert coordinator is not None
    print(f"streams: {coordinator.describe()}", file=sys.stderr, flush=True)
    api: HeadApi | None = None
    try:
        api = start_head_api(config, coordinator, head.bus)
        serve_until(coordinator.done, api.api, config.ui, listening)
    except (ApiRefused, StartupError) as err:
        return fail(str(err))
    except StopRequested as stop:
        print(f"\n{stop.signal_name}: stopping the fleet ...", file=sys.stderr, flush=True)
    finally:
        signals.closing()
        if api is not None:
            api.close()
        head.close()
    return 0
