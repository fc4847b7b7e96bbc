"""The command `edge-assistant` (installed by pip) and `python -m app`: one entry point for both."""

import sys


def main() -> int:
    """`history ...` searches the timeline; everything else is the assistant's CLI."""
    if sys.argv[1:2] == ["history"]:
        from app.history import main as history

        return history(sys.argv[2:])
    from app.cli import main as assistant

    return assistant()
