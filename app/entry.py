"""The command `edge-assistant` (installed by pip) and `python -m app`: one entry point for both."""

import sys


def main() -> int:
    """`history ...` searches the timeline; `ray-start ...` starts this box's Ray node for the fleet (token
    authentication set up); everything else is the assistant's CLI."""
    if sys.argv[1:2] == ["history"]:
        from app.history import main as history

        return history(sys.argv[2:])
    if sys.argv[1:2] == ["ray-start"]:
        from app.fleet.ray_start import main as ray_start

        return ray_start(sys.argv[2:])
    from app.cli import main as assistant

    return assistant()
