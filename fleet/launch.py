"""The fleet's launcher (`FLEET`): what `python -m app --ray ADDRESS` hands the front doors (app/launch.py) instead of
one box's. The head joins the cluster and starts the coordinator (fleet/head.py: a host on every box that offers
one, the streams placed, the outputs and the timeline once for the fleet); its desk is `FleetAssistant`, fed by the
head's bus, where every host's events arrive; its runtime watches are the head's (one registry and state file, in
the head's data folder, sent to every host), which MQTT's commands reach as on one box (app/startup.py); the
history is the fleet's one timeline. Streams added at run time follow the page's source policy (capture.policy), and
then the fleet's: network sources only."""

from __future__ import annotations

from app.config import AppConfig
from app.launch import Feeds, Launched, Launcher, RunAbout
from app.startup import runtime_watches, take_commands
from fleet.api_assistant import FleetAssistant
from fleet.coordinator import Coordinator
from fleet.head import start_head


def start_fleet(config: AppConfig, feeds: Feeds) -> Launched:
    """Starts the head (StartupError, exit 2, when the fleet cannot start); the fleet runs at once (`begin` has
    nothing left to do)."""
    head = start_head(config, displays=feeds.displays, writers=feeds.writers)
    coordinator = head.coordinator
    assert coordinator is not None
    desk = FleetAssistant(coordinator, head.bus)
    try:
        watches = runtime_watches(config, desk)  # kept ones are sent to the hosts now
        untake = take_commands(head.commands, desk, watches, head.bus, config)
    except BaseException:
        desk.close()
        head.close()
        raise

    def close_watches() -> None:
        untake()
        head.bus.unsubscribe(watches)
        watches.close()

    return Launched(
        config,
        desk,
        coordinator.done,
        watches,
        fleet_about(config, coordinator),
        begin=lambda: None,
        closers=[close_watches, desk.close, head.close],  # the hosts stop last
        streams=coordinator.describe(),
        upload_dirs=feeds.upload_dirs,  # no frame size: each host sizes frames for its model
    )


def fleet_about(config: AppConfig, coordinator: Coordinator) -> RunAbout:
    """The settings line: the model family as the hosts run it, and the hosts' devices; memory is each host's."""
    hosts = [h.info for h in list(coordinator.hosts.values()) if h.ready and h.info is not None]
    devices = ", ".join(sorted({info.device for info in hosts})) or "-"
    return RunAbout(
        family=hosts[0].family if hosts else "-",
        device=f"{len(hosts)} hosts on {devices}",
        dtype=config.model.dtype,
        memory_backend="fleet",
        memory_label="each host's own (in its answers)",
    )


FLEET = Launcher(start_fleet, "joining the fleet and placing its streams")
