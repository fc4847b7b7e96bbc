"""Which front door the fleet's head opens: the headless API, the page or the terminal, as the config says."""

from __future__ import annotations

from app.config import AppConfig


def run_fleet(config: AppConfig) -> int:
    if config.api.headless:
        from fleet.serve_api import serve_fleet_api

        return serve_fleet_api(config)
    if config.ui is not None:
        from fleet.web import serve_fleet

        return serve_fleet(config)
    from fleet.terminal import run_fleet as run_fleet_terminal

    return run_fleet_terminal(config)
