"""`edge-assistant ...` and `python -m edge_assistant ...`: the program of `python -m app` in the repository."""

from __future__ import annotations

import sys

import edge_assistant  # noqa: F401  (the rooms, importable by their names)


def main(argv: list[str] | None = None) -> int:
    from app.__main__ import main as program

    return program(argv)


if __name__ == "__main__":
    sys.exit(main())
