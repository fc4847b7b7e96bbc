"""`pip install .` ships the whole app: an installed copy, run from outside the checkout, holds every module git
tracks in the shipped packages, its `edge-assistant` command works, and its dependencies are declared."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SHIPPED = ("app", "bus", "cache", "capture", "model", "monitor", "ui")


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> Path:
    """The project installed with pip into a folder of its own (no dependencies: the venv has them), built from a
    copy of the tracked files (an in-tree build would reuse a stale build/ folder)."""
    source = tmp_path_factory.mktemp("source")
    tracked = subprocess.run(["git", "ls-files", "-z"], cwd=REPO, capture_output=True, check=True).stdout
    for name in filter(None, tracked.decode().split("\0")):
        if (REPO / name).is_file():
            (source / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(REPO / name, source / name)
    target = tmp_path_factory.mktemp("installed")
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-build-isolation", "--target", str(target),
         str(source)],
        check=True,
        timeout=300,
        cwd=target,
    )  # fmt: skip
    return target


def _tracked_modules() -> set[str]:
    out = subprocess.run(["git", "ls-files", *SHIPPED], cwd=REPO, capture_output=True, text=True, check=True)
    return {line for line in out.stdout.splitlines() if line.endswith((".py", ".cpp", ".h"))}


def _run_installed(installed: Path, *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(installed)}
    return subprocess.run(args, cwd=installed.parent, env=env, capture_output=True, text=True, timeout=120)


def test_installed_copy_holds_every_tracked_module(installed):
    shipped = {
        str(p.relative_to(installed))
        for top in SHIPPED
        for p in (installed / top).rglob("*")
        if p.suffix in (".py", ".cpp", ".h")
    }
    missing = sorted(_tracked_modules() - shipped)
    assert not missing, f"pip install . leaves out: {missing}"


def test_installed_command_and_module_run_outside_the_checkout(installed):
    script = installed / "bin" / "edge-assistant"
    assert script.exists(), "pip install . did not install the edge-assistant command"
    by_module = _run_installed(installed, sys.executable, "-m", "app", "--help")
    assert by_module.returncode == 0, by_module.stderr
    assert "--budget" in by_module.stdout
    by_script = _run_installed(installed, sys.executable, str(script), "history", "--help")
    assert by_script.returncode == 0, by_script.stderr
    # The copy ran, not the checkout: the module came from the installed folder.
    where = _run_installed(installed, sys.executable, "-c", "import app.cli; print(app.cli.__file__)")
    assert where.stdout.strip().startswith(str(installed)), where.stdout


def test_the_installed_command_watches_a_video_with_the_tiny_model(installed, tmp_path):
    from tests.app_helpers import video

    log = tmp_path / "events.jsonl"
    done = _run_installed(
        installed, sys.executable, str(installed / "bin" / "edge-assistant"), "--video", str(video(4)), "--model",
        "tiny", "--no-realtime", "--every", "2", "--max-rounds", "1", "--budget", "256", "--window", "16",
        "--max-new-tokens", "4", "--quiet", "--timeline", "", "--log-jsonl", str(log),
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    types = [json.loads(line)["type"] for line in log.read_text().splitlines()]
    assert "clip" in types and "answer" in types


def test_dependencies_are_declared(installed):
    from importlib.metadata import PathDistribution

    (dist_info,) = installed.glob("edge_stream_assistant-*.dist-info")
    names = {re.split(r"[ ;<>=!~\[]", req, maxsplit=1)[0].lower() for req in PathDistribution(dist_info).requires or []}
    for needed in ("torch", "transformers", "gradio", "av", "numpy", "paho-mqtt", "psutil"):
        assert needed in names, f"{needed} is not a declared dependency: {sorted(names)}"
