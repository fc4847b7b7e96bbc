"""`python -m app` and the `edge-assistant` command (pip installs it): the program's root.

It is the one module that stands above every room: `history ...` searches the timeline (terminal/history.py),
`ray-start ...` starts this box's Ray node for the fleet, `--ray ADDRESS|auto` runs the fleet (fleet/, which stands
on app/), and everything else is one box (app/cli.py)."""

import sys


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["history"]:
        from terminal.history import main as history

        return history(argv[1:])
    if argv[:1] == ["ray-start"]:
        from fleet.ray_start import main as ray_start

        return ray_start(argv[1:])
    from app.cli import load_config, open_door, run_one_box

    config = load_config(argv)
    if config.fleet is not None:
        from fleet.launch import FLEET

        return open_door(config, FLEET)  # the one-box doors, on the fleet's head
    return run_one_box(config)


if __name__ == "__main__":
    sys.exit(main())
