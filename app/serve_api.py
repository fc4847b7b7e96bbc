"""`python -m app --api` (one box, or with --ray the fleet's head): the HTTP API alone (headless, for a service):
the port answers 503 while the launcher (app/launch.py) loads the model or joins the fleet, then /api/v1 and /v1
are served with uvicorn on --host/--port until Ctrl-C (or SIGTERM) or the run's end.

Exit code 0 on a normal shutdown, 2 for bad input (an unloadable model, a port in use, no tokens where they are
needed: beyond loopback, or next to a page login)."""

from __future__ import annotations

import sys
import threading
import time
from dataclasses import dataclass

import uvicorn

from api.server import ApiRefused, RunningApi, api_refusal, headless_app, start_api
from api.starting import StartingApp
from app.config import AppConfig
from app.launch import ONE_BOX, Feeds, Launcher
from app.signals import SignalStop, StopRequested, run_stoppable
from app.startup import StartupError, fail
from capture import SourceError
from ui.access import url_host
from ui.connection_limit import ConnectionLimits, raise_fd_limit
from ui.connection_limit import install as install_connection_limit
from ui.guard import HostRule
from ui.login_throttle import LoginThrottle

START_TIMEOUT_S = 30.0
STOP_GRACE_S = 1.0  # seconds an open request (an events feed never ends) has to finish at a stop


def serve_api(config: AppConfig, launcher: Launcher = ONE_BOX) -> int:
    return run_stoppable(lambda signals: _serve(config, launcher, signals), "the API was served")


def _serve(config: AppConfig, launcher: Launcher, signals: SignalStop) -> int:
    ui = config.ui
    assert ui is not None, "serve_api() needs config.ui (--host, --port)"
    refused = api_refusal(config)
    if refused:
        return fail(refused)
    try:  # the port first: 503 and what is going on until the API is ready (api/starting.py)
        listening = open_port(ui, launcher.starting)
    except StartupError as err:
        return fail(str(err))
    try:
        return _serve_on(config, launcher, signals, listening)
    finally:
        listening.close()


def _serve_on(config: AppConfig, launcher: Launcher, signals: SignalStop, listening: Listening) -> int:
    try:
        launched = launcher.start(config, Feeds())
    except StartupError as err:
        return fail(str(err))
    if launched.streams:
        print(f"streams: {launched.streams}", file=sys.stderr, flush=True)
    listening.starting.stage = "starting the streams"
    api = None
    try:
        launched.begin()
        api = start_api(config, launched.desk, launched.options, launched.history, launched.watches)
        serve_until(launched.done, api, config.ui, listening)
    except (ApiRefused, SourceError, StartupError) as err:
        return fail(str(err))
    except StopRequested as stop:
        print(f"\n{stop.signal_name}: stopping ...", file=sys.stderr, flush=True)
    finally:
        signals.closing()
        if api is not None:
            api.close()
        launched.close()
    return 0


def serve_until(done: threading.Event, api: RunningApi, ui, listening: Listening | None = None) -> None:
    """Serves `api` alone on `listening` (opened here when None) until `done` is set, then stops the server; a
    StopRequested (Ctrl-C, SIGTERM) passes through, the server stopped first."""
    listening = listening or open_port(ui, "starting the API")
    try:
        listening.ready(api)
        while not done.wait(0.5):
            pass
        print("the run is finished; closing the API", file=sys.stderr, flush=True)
    finally:
        listening.close()


@dataclass
class Listening:
    """The API's server, listening from the start: `starting` answers 503 until `ready(api)`."""

    server: uvicorn.Server
    thread: threading.Thread
    starting: StartingApp
    ui: object
    limits: ConnectionLimits

    @property
    def port(self) -> int:
        return self.server.servers[0].sockets[0].getsockname()[1] if self.server.servers else self.ui.port

    def ready(self, api: RunningApi) -> None:
        """The API itself from now on, behind the page's guard and body bounds; prints where it is."""
        ui = self.ui
        self.starting.ready(
            headless_app(api, HostRule(ui.host, ui.allowed_hosts), LoginThrottle(), self.limits.request_timeout_s)
        )
        print(f"api ready: http://{url_host(ui.host)}:{self.port}/api/v1/ (docs/api.md)", flush=True)

    def close(self) -> None:
        stop_server(self.server, self.thread)


def open_port(ui, stage: str, limits: ConnectionLimits | None = None) -> Listening:
    """Listens on ui.host:ui.port in a thread (returns once it listens) with the page's connection bounds
    (`limits`, ui.connection_limit: connections at most, a request head and an API body within its request
    timeout; tests pass low ones), answering 503 with `stage` until `ready`. StartupError when it cannot listen."""
    limits = limits or ConnectionLimits()
    raise_fd_limit()
    starting = StartingApp(stage)
    # an events feed never ends by itself: at a stop, open requests get STOP_GRACE_S to finish, then are cut
    config = uvicorn.Config(
        starting, host=ui.host, port=ui.port, log_level="warning", lifespan="off",
        timeout_graceful_shutdown=STOP_GRACE_S,
    )  # fmt: skip
    server = uvicorn.Server(config)
    config.load()  # uvicorn's protocol class chosen, then bounded before it listens
    install_connection_limit(server, limits)
    server.install_signal_handlers = lambda: None  # the main thread's handlers (app.signals) stay
    thread = threading.Thread(target=server.run, name="api-server", daemon=True)
    thread.start()
    deadline = time.monotonic() + START_TIMEOUT_S
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            stop_server(server, thread)
            raise StartupError(f"cannot serve the API on {ui.host}:{ui.port}; try another --port or --host")
        time.sleep(0.05)
    listening = Listening(server, thread, starting, ui, limits)
    print(f"api listening on http://{url_host(ui.host)}:{listening.port}/ ({stage}: 503 until ready)", flush=True)
    return listening


def serve_headless(
    api: RunningApi, ui, limits: ConnectionLimits | None = None
) -> tuple[uvicorn.Server, threading.Thread]:
    """Serves `api` alone on ui.host:ui.port at once (open_port, then ready): the server and its thread."""
    listening = open_port(ui, "starting the API", limits)
    listening.ready(api)
    return listening.server, listening.thread


def stop_server(server: uvicorn.Server | None, thread: threading.Thread | None) -> None:
    if server is not None:
        server.should_exit = True
    if thread is not None:
        thread.join(10.0)
