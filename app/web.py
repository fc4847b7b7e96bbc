"""`python -m app --ui`: load the model, start the assistant, serve the page until Ctrl-C (or SIGTERM).

Exit code 0 on a normal shutdown, 2 for bad input (an unloadable model, an unopenable --video, a port in use).
Who may use the page (docs/security.md, "The page"): the login (ui.access), the gate in front of Gradio (ui.guard:
Host and Origin checked, failed logins throttled), bounded session state, uploads in a private folder
(ui.served_files).
"""

from __future__ import annotations

import sys
from pathlib import Path
from urllib.parse import urlsplit

import gradio as gr
from gradio.exceptions import ServerFailedToStartError
from gradio.utils import get_upload_folder
from starlette.middleware import Middleware

from api.body_limit import API_PREFIXES
from api.server import ApiRefused, RunningApi, start_api
from api.server import middleware as api_middleware
from app.config import AppConfig, UIConfig
from app.front_door import capture_options as front_door_options
from app.launch import ONE_BOX, Feeds, Launched, Launcher, RunAbout
from app.signals import SignalStop, StopRequested, run_stoppable
from app.startup import StartupError, fail
from bus.redact import redact_source
from capture import SourceError
from capture.options import CaptureOptions
from monitor.memory_monitor import MemoryMonitor
from ui.access import PageLogin, open_warning, page_login, ready_lines, url_host
from ui.connection_limit import AnonymousRequestLimit, ConnectionLimits, raise_fd_limit
from ui.connection_limit import install as install_connection_limit
from ui.controls import Controls
from ui.guard import HostRule, PageGuard, drop_gradio_cors
from ui.login_throttle import LoginThrottle
from ui.page import build_page, preview_folder
from ui.preview_files import PreviewFiles
from ui.proxies import check_forwarded_trust, forwarded_trust
from ui.render import PageInfo
from ui.served_files import private_upload_folder
from ui.state import LiveState, MemoryPoint
from ui.upload_limits import UploadGuard, UploadLimits
from ui.watch_form import WatchForm


def memory_point(monitor: MemoryMonitor):
    """The plot's memory reading: device (or unified) memory used where the backend knows it, else the RSS."""

    def sample() -> MemoryPoint:
        s = monitor.sample()
        used = s.device_used_bytes if s.device_used_bytes is not None else s.process_rss_bytes
        return MemoryPoint(used_bytes=int(used), label=s.label, backend=s.backend)

    return sample


def capture_options(config: AppConfig, max_size: tuple[int, int] | None) -> CaptureOptions:
    """The page's options: those of every front door, plus the files uploaded into Gradio's upload folder."""
    return front_door_options(config, max_size, upload_dirs=(Path(get_upload_folder()),))


def page_info(config: AppConfig, about: RunAbout) -> PageInfo:
    return PageInfo(
        model=config.model.model,
        family=about.family,
        device=about.device,
        dtype=about.dtype,
        policy=config.cache.policy,
        budget=config.cache.budget,
        window=config.cache.window,
        policy_settings=config.cache.policy_settings.describe(),
        memory_backend=about.memory_backend,
        memory_label=about.memory_label,
        random_weights=config.model.model == "tiny",
        demo_weights=config.model.model == "demo",
    )


MAX_PAGE_SESSIONS = 64  # browser tabs (and API callers) whose Gradio state is kept; the least recent goes first


def launch_page(
    page: gr.Blocks,
    ui: UIConfig,
    login: PageLogin | None,
    throttle: LoginThrottle | None = None,
    limits: ConnectionLimits | None = None,
    api: RunningApi | None = None,
) -> HostRule:
    """Serves the page in the background (returns once it listens) behind ui.guard's gate (Host and Origin
    checks, failed logins throttled), with `login` required when given; OSError / ServerFailedToStartError.
    Returns the Host rule (the share link's host is in it). `throttle`: tests pass one with their own clock;
    `limits`: the bounds on connections before the login (ui.connection_limit), tests pass low ones.
    api: the HTTP API's routes, served before Gradio's behind the same gate (and bounded bodies); they check
    their own bearer tokens, so the page's login and its bound on anonymous requests leave them alone."""
    rule = HostRule(ui.host, ui.allowed_hosts)
    limits = limits or ConnectionLimits()
    raise_fd_limit()
    guard = Middleware(PageGuard, rule=rule, throttle=throttle or LoginThrottle())
    extra = {} if api is None else {"routes": api.routes}
    if api is None:
        gate = [guard]
    else:  # API bodies have the page's request timeout too, with or without a login
        gate = api_middleware(rule, guard.kwargs["throttle"], api.context.settings, limits.request_timeout_s)
    exempt = () if api is None else API_PREFIXES
    anonymous = Middleware(AnonymousRequestLimit, limits=limits, exempt_prefixes=exempt)
    uploads = Middleware(UploadGuard, limits=UploadLimits(ui.max_uploads, ui.max_upload_total_mb * 2**20))
    with forwarded_trust(ui.trusted_proxies):
        _launch(page, ui, login, [*gate, anonymous, uploads], extra)
    try:
        check_forwarded_trust(page.server.config, ui.trusted_proxies)
    except RuntimeError:
        page.close()
        raise
    install_connection_limit(page.server, limits)
    if page.share_url:
        rule.allow(urlsplit(page.share_url).hostname or "")
    return rule


def _launch(page: gr.Blocks, ui: UIConfig, login: PageLogin | None, middleware: list[Middleware], extra: dict) -> None:
    page.launch(
        server_name=ui.host,
        server_port=ui.port,
        share=ui.share,
        auth=None if login is None else (login.user, login.password),
        auth_message=LOGIN_MESSAGE if login is not None and login.generated else None,
        max_file_size=f"{ui.max_upload_mb}mb",
        prevent_thread_lock=True,
        ssr_mode=False,
        quiet=True,
        app_kwargs={"middleware": middleware, **extra},
        state_session_capacity=MAX_PAGE_SESSIONS,
        footer_links=["gradio", "settings"],  # no API page: the page's endpoints are its own, not an API
        run_history=False,  # no copy of the questions in the browser's storage
        enable_monitoring=False,
        mcp_server=False,
    )
    drop_gradio_cors(page.server_app)


def page_api(config: AppConfig, launched: Launched) -> RunningApi | None:
    """The HTTP API served with the page; None (said on stderr) where it would need tokens none were given for."""
    try:
        return start_api(config, launched.desk, launched.options, launched.history, launched.watches)
    except ApiRefused as err:
        print(f"api off: {err}", file=sys.stderr, flush=True)
        return None


LOGIN_MESSAGE = "The password was printed once in the terminal that started the assistant."


def open_page(page: gr.Blocks, ui: UIConfig, api: RunningApi | None = None) -> int | None:
    """Serves `page` as `ui` says, with its login (required beyond loopback; generated if none was given, or the
    --open warning) and the gate (`launch_page`), and prints where it listens and who may log in. Returns None
    once it listens, or the exit code after saying why it cannot (a port in use, an address not of this box)."""
    login = page_login(ui.auth, ui.beyond_loopback, ui.no_login)
    if login is None and ui.reachable_from_network:
        print(open_warning(ui.host, ui.port, ui.share, ui.allowed_hosts), file=sys.stderr, flush=True)
    try:
        launch_page(page, ui, login, api=api)
    except (OSError, ServerFailedToStartError) as err:
        reason = str(err).split(". ")[0]
        return fail(f"cannot serve the page on {ui.host}:{ui.port} ({reason}); try another --port or --host")
    for line in ready_lines(ui.host, page.server_port, page.share_url, login):
        print(line, flush=True)  # the terminal only: a generated password is never logged
    if api is not None:
        print(f"api ready: http://{url_host(ui.host)}:{page.server_port}/api/v1/ (docs/api.md)", flush=True)
    return None


def serve(config: AppConfig, launcher: Launcher = ONE_BOX) -> int:
    def run(signals: SignalStop) -> int:
        with private_upload_folder():
            return _serve(config, launcher, signals)

    return run_stoppable(run, "the page was served")


def _serve(config: AppConfig, launcher: Launcher, signals: SignalStop) -> int:
    ui = config.ui
    assert ui is not None, "serve() needs config.ui (python -m app --ui)"
    live = LiveState(budget=config.cache.budget, streams=[stream.name for stream in config.streams])
    try:
        launched = launcher.start(config, Feeds(displays=[live], upload_dirs=(Path(get_upload_folder()),)))
    except StartupError as err:
        return fail(str(err))
    desk = launched.desk
    names = tuple(desk.desk_streams())  # one box without --stream: its default one
    if launched.about.memory is not None:
        live.measure_memory(memory_point(launched.about.memory))
    if launched.streams:
        print(f"streams: {launched.streams}", file=sys.stderr, flush=True)
    page, previews, api = None, None, None
    try:
        controls = Controls(desk, live, launched.options, max_upload_bytes=ui.max_upload_mb * 2**20, streams=names)
        # the page sends this box to every browser: never with the login (type it again to restart such a source)
        in_place = desk.abilities.in_place and config.streams
        initial_source = redact_source(str(config.streams[0].capture.source)) if in_place else ""
        previews = PreviewFiles(preview_folder(), keep=8 * len(names))  # a few frames per stream for slow tabs
        info = page_info(config, launched.about)
        watches = None if launched.watches is None else WatchForm(launched.watches, live.note)  # owner "page"
        page = build_page(live, controls, info, desk.schedule, previews, initial_source, launched.history,
                          abilities=desk.abilities, watches=watches)  # fmt: skip
        page.queue(default_concurrency_limit=1)  # commands one at a time, in order; the refresh timers are unlimited
        launched.begin()
        api = page_api(config, launched)
        code = open_page(page, ui, api)
        if code is not None:
            return code
        while not launched.done.wait(0.5):
            pass
        print("the run is finished; closing the page", file=sys.stderr, flush=True)
    except SourceError as err:
        return fail(str(err))
    except StopRequested as stop:
        print(f"\n{stop.signal_name}: stopping ...", file=sys.stderr, flush=True)
    finally:
        signals.closing()
        if page is not None:
            page.close()
        if api is not None:
            api.close()
        launched.close()
        if previews is not None:
            previews.close()
    return 0
