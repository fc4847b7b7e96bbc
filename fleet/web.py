"""`python -m app --ray ADDRESS --ui`: the page on the head drives the fleet. The head joins the cluster and starts
the coordinator as its terminal does (fleet/head.py); the page is the one-box page (ui/), fed from the head's
bus, where every host's events arrive: each stream's panel shows its live view (the shrunk previews), its state
and the host it runs on; its answers and alerts come as from one box. Questions to one stream or all are routed
by the coordinator. The page is served with the one-box page's security (app.web.open_page: a login beyond
loopback, the Host and Origin gate, uploads in a private folder), without the controls the fleet cannot do (Start,
Stop, Reset memory, the standing question's editor, file and camera sources: ui/page.py `build_page(fleet=True)`).
The HTTP API is served beside it, as on one box (fleet/head_api.py)."""

from __future__ import annotations

import sys

from api.server import ApiRefused
from app.config import AppConfig
from app.signals import SignalStop, StopRequested, run_stoppable
from app.startup import StartupError, fail
from app.web import capture_options, open_page, timeline_history
from fleet.coordinator import Coordinator
from fleet.head import start_head
from fleet.head_api import HeadApi, start_head_api
from fleet.page_commands import FleetCommands
from ui.controls import Controls
from ui.page import build_page, preview_folder
from ui.preview_files import PreviewFiles
from ui.render import PageInfo
from ui.served_files import private_upload_folder
from ui.state import LiveState


def fleet_page_info(config: AppConfig, coordinator: Coordinator) -> PageInfo:
    """The settings line: the model and the cache as every host runs them, and the hosts' devices."""
    hosts = [h.info for h in list(coordinator.hosts.values()) if h.ready and h.info is not None]
    devices = ", ".join(sorted({info.device for info in hosts})) or "-"
    return PageInfo(
        model=config.model.model,
        family=hosts[0].family if hosts else "-",
        device=f"{len(hosts)} hosts on {devices}",
        dtype=config.model.dtype,
        policy=config.cache.policy,
        budget=config.cache.budget,
        window=config.cache.window,
        policy_settings=config.cache.policy_settings.describe(),
        memory_backend="fleet",
        memory_label="each host's own (in its answers)",
        random_weights=config.model.model == "tiny",
        demo_weights=config.model.model == "demo",
    )


def head_api(config: AppConfig, coordinator: Coordinator, bus) -> HeadApi | None:
    """The HTTP API served with the fleet's page; None (said on stderr) where it would need tokens none were given
    for (as app.web.page_api says for one box)."""
    try:
        return start_head_api(config, coordinator, bus)
    except ApiRefused as err:
        print(f"api off: {err}", file=sys.stderr, flush=True)
        return None


def serve_fleet(config: AppConfig) -> int:
    def run(signals: SignalStop) -> int:
        with private_upload_folder():
            return _serve(config, signals)

    return run_stoppable(run, "the page was served")


def _serve(config: AppConfig, signals: SignalStop) -> int:
    ui = config.ui
    assert ui is not None and config.fleet is not None, "serve_fleet needs --ui and --ray"
    names = tuple(stream.name for stream in config.streams)
    live = LiveState(budget=config.cache.budget, streams=names)  # no memory series: memory is each host's
    try:
        head = start_head(config, displays=[live])
    except StartupError as err:
        return fail(str(err))
    coordinator = head.coordinator
    assert coordinator is not None
    print(f"streams: {coordinator.describe()}", file=sys.stderr, flush=True)
    page, previews, api = None, None, None
    try:
        commands = FleetCommands(coordinator)
        options = capture_options(config, None)  # each host sizes frames for its model
        controls = Controls(commands, live, options, max_upload_bytes=ui.max_upload_mb * 2**20, streams=names)
        previews = PreviewFiles(preview_folder(), keep=8 * len(names))
        info = fleet_page_info(config, coordinator)
        history = timeline_history(config)
        page = build_page(live, controls, info, commands.schedule, previews, "", history, fleet=True)
        page.queue(default_concurrency_limit=1)  # commands one at a time, in order; the refresh timers are unlimited
        api = head_api(config, coordinator, head.bus)
        code = open_page(page, ui, None if api is None else api.api)
        if code is not None:
            return code
        while not coordinator.done.wait(0.5):
            pass
        print("the run is finished; closing the page", file=sys.stderr, flush=True)
    except StopRequested as stop:
        print(f"\n{stop.signal_name}: stopping the fleet ...", file=sys.stderr, flush=True)
    finally:
        signals.closing()
        if page is not None:
            page.close()
        if api is not None:
            api.close()
        head.close()
        if previews is not None:
            previews.close()
    return 0
