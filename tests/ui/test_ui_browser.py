"""The web demo end to end: `python -m app --ui --model tiny --video <live file>` in a subprocess, driven by
Debian's headless chromium through playwright-core (tests/ui_browser/page_test.js), then stopped with SIGINT.

Needs chromium and node with playwright-core: `bash .ci/ui_setup.sh` installs both. Without them the test
fails (it is part of CI); set EDGE_ASSISTANT_ALLOW_NO_BROWSER=1 to skip it instead on a machine without them.
The screenshot is kept in artifacts/ui-test/page.png (failure.png when a check failed).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path

import pytest

from tests.support.app_helpers import app_command

REPO = Path(__file__).resolve().parents[2]
BROWSER_DIR = REPO / "tests" / "ui_browser"
ARTIFACTS = REPO / "artifacts" / "ui-test"
CHROMIUM = os.environ.get("CHROMIUM_PATH", "/usr/bin/chromium")
ALLOW_NO_BROWSER = os.environ.get("EDGE_ASSISTANT_ALLOW_NO_BROWSER") == "1"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def browser_missing() -> str | None:
    """What is missing to drive a browser, or None."""
    if shutil.which("node") is None:
        return "node is not installed"
    if not Path(CHROMIUM).exists():
        return f"chromium is not installed at {CHROMIUM}"
    if not (BROWSER_DIR / "node_modules" / "playwright-core").is_dir():
        return "playwright-core is not installed in tests/ui_browser/node_modules"
    return None


class AppProcess:
    """`python -m app ...` with its output collected by a thread; `ready` is set at 'page ready'."""

    def __init__(self, args: list[str]) -> None:
        env = dict(os.environ, PYTHONUNBUFFERED="1", GRADIO_ANALYTICS_ENABLED="False")
        self.proc = subprocess.Popen(
            app_command(*args),
            cwd=REPO,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        self.lines: list[str] = []
        self.ready = threading.Event()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        for line in self.proc.stdout:
            self.lines.append(line.rstrip("\n"))
            if line.startswith("page ready:"):
                self.ready.set()

    @property
    def output(self) -> str:
        return "\n".join(self.lines)

    def wait_ready(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while not self.ready.wait(0.2):
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise AssertionError(f"the app did not serve the page (rc={self.proc.poll()}):\n{self.output}")

    def interrupt(self, timeout: float = 30.0) -> int:
        """Ctrl-C; the exit code (the process is killed if it does not exit in time)."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(10)
            raise AssertionError(f"the app did not exit within {timeout:g} s of SIGINT:\n{self.output}") from None
        finally:
            self._reader.join(5)


@pytest.fixture(scope="module")
def demo_video(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("ui-video") / "demo.mp4"
    subprocess.run(
        [sys.executable, "scripts/make_demo_video.py", "--duration", "40", "--size", "320x240", "--fps", "10"]
        + ["--scene-seconds", "10", "--out", str(out)],
        cwd=REPO,
        check=True,
        capture_output=True,
    )
    return out


@pytest.fixture(scope="module")
def app(demo_video):
    port = free_port()
    process = AppProcess(
        ["--ui", "--model", "tiny", "--video", str(demo_video), "--every", "8", "--budget", "256"]
        + ["--max-new-tokens", "24", "--port", str(port)]
    )
    try:
        process.wait_ready(90)
        process.url = f"http://127.0.0.1:{port}/"
        process.video = demo_video
        yield process
    finally:
        if process.proc.poll() is None:
            process.proc.kill()
            process.proc.wait(10)


@pytest.fixture
def browser() -> None:
    """Checked before the app starts: a missing browser fails (or skips) at once."""
    missing = browser_missing()
    if missing is not None:
        if ALLOW_NO_BROWSER:
            pytest.skip(f"{missing} (EDGE_ASSISTANT_ALLOW_NO_BROWSER=1)")
        pytest.fail(f"{missing}: run `bash .ci/ui_setup.sh` (or set EDGE_ASSISTANT_ALLOW_NO_BROWSER=1 to skip)")


def run_page_script(
    script: str, url: str, tmp_path: Path, extra: list[str], app: AppProcess, screenshots: list[str], timeout=150
) -> dict:
    """Runs tests/ui_browser/SCRIPT on the page at `url`; keeps its screenshots (and failure.png) in artifacts/
    and returns what the script saw (its last stdout line, JSON). Fails with the browser's and the app's output
    when the script fails."""
    result = subprocess.run(
        ["node", str(BROWSER_DIR / script), url, str(tmp_path), *extra],
        cwd=BROWSER_DIR,
        env=dict(os.environ, CHROMIUM_PATH=CHROMIUM),
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    for name in [*screenshots, "failure.png"]:
        (ARTIFACTS / name).unlink(missing_ok=True)  # none left over from an earlier run
        if (tmp_path / name).exists():
            shutil.copy(tmp_path / name, ARTIFACTS / name)
    report = f"browser stdout:\n{result.stdout}\nbrowser stderr:\n{result.stderr}\napp output:\n{app.output}"
    assert result.returncode == 0, report
    return json.loads(result.stdout.strip().splitlines()[-1])


def drive_app(
    app_args: list[str], script: str, tmp_path: Path, extra: list[str], screenshots: list[str], timeout=150
) -> tuple[dict, AppProcess, int]:
    """Starts `python -m app APP_ARGS --port FREE`, runs SCRIPT on its page (`run_page_script`), stops the app
    with SIGINT whatever happened; returns what the script saw, the app and its exit code."""
    port = free_port()
    app = AppProcess([*app_args, "--port", str(port)])
    try:
        app.wait_ready(90)
        seen = run_page_script(script, f"http://127.0.0.1:{port}/", tmp_path, extra, app, screenshots, timeout)
    finally:
        code = app.interrupt()
    return seen, app, code


def test_the_page_streams_answers_plots_memory_and_survives_a_bad_url(browser, app, tmp_path):
    bad_url = f"http://127.0.0.1:{free_port()}/missing.mp4"
    seen = run_page_script("page_test.js", app.url, tmp_path, [bad_url, str(app.video)], app, ["page.png"])
    assert "[auto]" not in seen["typedAnswers"][0]
    assert seen["streamTimeAfterError"] > seen["firstStreamTime"]
    assert "cannot watch it" in seen["badUrlMessage"]
    assert "demo.mp4" in seen["statusAfterUpload"]
    assert (tmp_path / "page.png").stat().st_size > 10_000
    assert "Traceback" not in app.output, app.output


def test_ctrl_c_stops_the_page_cleanly(app):
    with urllib.request.urlopen(app.url, timeout=10) as response:
        assert response.status == 200
    assert app.interrupt() == 0, app.output
    assert "stopping" in app.output and "Traceback" not in app.output
