"""The HTTP API on the fleet's head (`--ray` with `--api` or `--ui`): the API of one box (api/) over the fleet
(fleet/api_assistant.py), fed by the head's bus, where every host's events arrive. Its runtime watches are the
head's (one registry and state file, in the head's data folder); the history is the fleet's one timeline."""

from __future__ import annotations

from dataclasses import dataclass

from api.server import RunningApi, start_api
from app.config import AppConfig
from app.front_door import capture_options, timeline_history
from app.startup import runtime_watches
from bus import EventBus
from fleet.api_assistant import FleetAssistant
from fleet.coordinator import Coordinator
from watches.runtime import RuntimeWatches


@dataclass
class HeadApi:
    """The API of a fleet run; `close()` before the head's (the hosts stop after it)."""

    api: RunningApi
    assistant: FleetAssistant
    watches: RuntimeWatches

    def close(self) -> None:
        self.api.close()
        self.bus.unsubscribe(self.watches)
        self.watches.close()
        self.assistant.close()

    @property
    def bus(self) -> EventBus:
        return self.assistant.bus


def start_head_api(config: AppConfig, coordinator: Coordinator, bus: EventBus) -> HeadApi:
    """The API for the fleet (api.server.ApiRefused where it would need tokens none were given for). Streams added
    through it follow the page's source policy (capture.policy), and then the fleet's: network sources only."""
    assistant = FleetAssistant(coordinator, bus)
    watches = runtime_watches(config, assistant)  # kept ones are sent to the hosts now
    try:
        api = start_api(config, assistant, capture_options(config, None), timeline_history(config), watches)
    except BaseException:
        bus.unsubscribe(watches)
        watches.close()
        assistant.close()
        raise
    return HeadApi(api, assistant, watches)
