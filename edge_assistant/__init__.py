"""The one name the wheel installs. Its rooms (app/, cache/, model/, ...) live inside it when installed
(`site-packages/edge_assistant/app/...`) and beside it in the repository (`./app/...`); importing this package makes
them importable by their own names, the way the code imports them (`from app.assistant import Assistant`), in this
process only. A plain interpreter that never imported `edge_assistant` sees none of them, so another
distribution's `app` or `cache` is neither overwritten by ours nor shadows ours once we run.

`ROOMS` is the one list of the project's installed packages: the wheel's build (setup.py), the install test, the
import-layer test and the Dockerfile's check read it. Standard library only: Ray's workers import it first
(`ready`, their setup hook)."""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import sys
from pathlib import Path

ROOMS = (
    "app", "api", "bus", "cache", "capture", "fleet", "model", "monitor", "outputs", "terminal", "timeline", "ui",
    "watches",
)  # fmt: skip
HERE = Path(__file__).resolve().parent
# installed: the rooms are inside this package; in the repository: beside it
ROOT = HERE if (HERE / "app").is_dir() else HERE.parent


class RoomFinder(importlib.abc.MetaPathFinder):
    """Finds a room (a top-level name of ROOMS) in ROOT; its submodules are then found through the room's
    `__path__` as usual, and every other name is left to the finders after it."""

    def find_spec(self, name, path=None, target=None):
        if path is not None or name not in ROOMS:
            return None
        return importlib.machinery.PathFinder.find_spec(name, [str(ROOT)])


def ready() -> None:
    """Makes the rooms importable in this process (once; importing the package does it)."""
    if not any(isinstance(finder, RoomFinder) for finder in sys.meta_path):
        sys.meta_path.insert(0, RoomFinder())


ready()
