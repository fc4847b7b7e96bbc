"""`python -m app --api`: the HTTP API alone (headless, for a service): load the model, start the assistant,
serve /api/v1 and /v1 with uvicorn on --host/--port until Ctrl-C (or SIGTERM) or the run's end.

Exit code 0 on a normal shutdown, 2 for bad input (an unloadable model, a port in use, no tokens where they are
needed: beyond loopback, or next to a page login)."""

from __future__ import annotations

import sys
import threading
import time

import uvicorn

from api.server import ApiRefused, RunningApi, headless_app, start_api
from app.config import AppConfig
from app.front_door import capture_options, timeline_history
from app.signals import SignalStop, StopRequested, run_stoppable
from app.startup import StartupError, build_assistant, fail, start_session
from capture import SourceError
from monitor.memory_monitor import MemoryMonitor
from ui.access import url_host
from ui.connection_limit import ConnectionLimits, raise_fd_limit
from ui.connection_limit import install as install_connection_limit
from ui.guard import HostRule
from ui.login_throttle import LoginThrottle

START_TIMEOUT_S = 30.0
STOP_GRACE_S = 1.0  # seconds an open request (an events feed never ends) has to finish at a stop


def serve_api(config: AppConfig) -> int:
    return run_stoppable(lambda signals: _serve(config, signals), "the API was served")


def _serve(config: AppConfig, signals: SignalStop) -> int:
    ui = config.ui
    assert ui is not None, "serve_api() needs config.ui (--host, --port)"
    try:
        loaded, streams, factory = start_session(config)
    except StartupError as err:
        return fail(str(err))
    monitor = MemoryMonitor()
    running = build_assistant(config, streams, monitor, [], factory)
    assistant = running.assistant
    options = capture_options(config, loaded.adapter.frame_size())
    assistant.start()
    api = None
    try:
        try:
            api = start_api(config, assistant, options, timeline_history(config), running.watches)
        except ApiRefused as err:
            return fail(str(err))
        running.watch_configured_sources(config, loaded)
        serve_until(assistant.done, api, ui)
    except (SourceError, StartupError) as err:
        return fail(str(err))
    except StopRequested as stop:
        print(f"\n{stop.signal_name}: stopping ...", file=sys.stderr, flush=True)
    finally:
        signals.closing()
        if api is not None:
            api.close()
        running.close()
    return 0


def serve_until(done: threading.Event, api: RunningApi, ui) -> None:
    """Serves `api` alone (serve_headless) until `done` is set, then stops the server; a StopRequested (Ctrl-C,
    SIGTERM) passes through, the server stopped first."""
    server, thread = serve_headless(api, ui)
    try:
        while not done.wait(0.5):
            pass
        print("the run is finished; closing the API", file=sys.stderr, flush=True)
    finally:
        stop_server(server, thread)


def serve_headless(
    api: RunningApi, ui, limits: ConnectionLimits | None = None
) -> tuple[uvicorn.Server, threading.Thread]:
    """Serves `api` alone on ui.host:ui.port in a thread (returns once it listens) behind the page's guard and the
    page's connection bounds (`limits`, ui.connection_limit: connections at most, a request head and an API body
    within its request timeout; tests pass low ones), and prints where. StartupError when it cannot listen there."""
    limits = limits or ConnectionLimits()
    raise_fd_limit()
    app = headless_app(api, HostRule(ui.host, ui.allowed_hosts), LoginThrottle(), limits.request_timeout_s)
    # an events feed never ends by itself: at a stop, open requests get STOP_GRACE_S to finish, then are cut
    config = uvicorn.Config(
        app, host=ui.host, port=ui.port, log_level="warning", lifespan="off", timeout_graceful_shutdown=STOP_GRACE_S
    )
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
    port = server.servers[0].sockets[0].getsockname()[1] if server.servers else ui.port
    print(f"api ready: http://{url_host(ui.host)}:{port}/api/v1/ (docs/api.md)", flush=True)
    return server, thread


def stop_server(server: uvicorn.Server | None, thread: threading.Thread | None) -> None:
    if server is not None:
        server.should_exit = True
    if thread is not None:
        thread.join(10.0)
