"""What a fresh interpreter has imported after importing the program's modules (only a new interpreter shows it):
one child per test session, shared by the checks that the headless API never loads Gradio (tests/app/
test_front_door.py) and that nothing but a running fleet loads Ray (tests/project/test_import_layers.py)."""

from __future__ import annotations

import functools
import json
import subprocess
import sys

from tests.support.app_helpers import REPO

# the headless API, the terminal and both launchers, then every other front door (the page: app.web)
HEADLESS = ("app.serve_api", "app.terminal", "app.launch", "fleet.launch")
EVERYTHING = HEADLESS + (
    "app.__main__", "app.cli", "app.config", "app.terminal", "app.web", "app.startup", "fleet.coordinator",
    "fleet.host",
)  # fmt: skip
WATCHED = ("gradio", "ray")

_CHILD = f"""
import importlib, json, sys
for stage in ({HEADLESS!r}, {EVERYTHING!r}):
    for module in stage:
        importlib.import_module(module)
    print(json.dumps({{name: name in sys.modules for name in {WATCHED!r}}}), flush=True)
"""


@functools.cache
def loaded_after_imports() -> tuple[dict[str, bool], dict[str, bool]]:
    """({"gradio": ..., "ray": ...} after importing HEADLESS, the same after importing EVERYTHING), in a new
    interpreter; AssertionError with its stderr if it failed."""
    done = subprocess.run([sys.executable, "-c", _CHILD], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    headless, everything = (json.loads(line) for line in done.stdout.splitlines())
    return headless, everything
