"""What the browser tests of the page share (tests/ui/test_ui_browser*.py): `python -m app --ui ...` as a process
whose output a thread collects (`AppProcess`), the check that a browser is there (the `browser` fixture), running
one tests/ui_browser/*.js script on a page (`run_page_script`), and the page apps the tests share.

Starting the app (the tiny model, Gradio) and chromium is most of a browser test's time, so the tests whose
configurations agree use one running app per session (`SHARED`, by name):
- "one-stream": `--stream a=VIDEO` (played at its real speed, looped), a standing question every 4 s, a timeline,
  sources on 127.0.0.0/8 allowed (the page, add stream, history and watches tests);
- "two-streams": `--stream a=... --stream b=...` (looped) with a watch on stream a that always fires (the streams
  and alerts tests).
Both play their files at their real speed: as fast as the model goes (--no-realtime), the model would take a core
of its own all along, and the browser beside it would wait for it.
The login test (a login for the whole page) keeps an app of its own (`drive_app`). A shared app is started on its
first use; a test that stops it with Ctrl-C is its last user, and a later test gets a fresh one. At the end of the
session each one still running is stopped with SIGINT and must exit 0 without a traceback.

Needs chromium and node with playwright-core: `bash .ci/ui_setup.sh` installs both. Without them the tests fail
(they are part of CI); set EDGE_ASSISTANT_ALLOW_NO_BROWSER=1 to skip them instead on a machine without them.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from capture.synth import write_video
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


@dataclass
class PageApp:
    """A running page app: its process, its page's address, and the files it was started with."""

    process: AppProcess
    url: str
    folder: Path
    videos: dict[str, Path]
    timeline: Path | None = None

    @property
    def output(self) -> str:
        return self.process.output

    def interrupt(self) -> int:
        return self.process.interrupt()


ALERTS_TOML = """\
[alerts.person]
question = "Is there a person?"
streams = ["a"]
every = 4
threshold = 0.0
on_after = 1
"""


def _video(path: Path, seconds: float) -> Path:
    """A generated 320x240 video (scenes of 10 s), written in this process."""
    write_video(path, size=(320, 240), fps=5, duration_s=seconds, scene_seconds=10.0, options={"preset": "ultrafast"})
    return path


def _start(name: str, folder: Path) -> PageApp:
    port = free_port()
    common = ["--ui", "--model", "tiny", "--budget", "256", "--port", str(port)]
    if name == "one-stream":
        videos = {"a": _video(folder / "a.mp4", 60)}
        timeline = folder / "data" / "timeline.sqlite"
        args = [*common, "--stream", f"a={videos['a']}", "--loop", "--every", "4", "--max-new-tokens", "16"]
        args += ["--timeline", str(timeline), "--allow-source-net", "127.0.0.0/8"]
    elif name == "two-streams":
        videos = {s: _video(folder / f"{s}.mp4", 20) for s in "ab"}
        timeline = None
        config = folder / "alerts.toml"
        config.write_text(ALERTS_TOML)
        args = [*common, "--stream", f"a={videos['a']}", "--stream", f"b={videos['b']}", "--loop"]
        args += ["--every", "0", "--max-new-tokens", "8", "--config", str(config)]
    else:
        raise ValueError(f"no shared page app {name!r}: one-stream or two-streams")
    process = AppProcess(args)
    app = PageApp(process, f"http://127.0.0.1:{port}/", folder, videos, timeline)
    try:
        process.wait_ready(90)
    except BaseException:
        process.proc.kill()
        process.proc.wait(10)
        raise
    return app


SHARED: dict[str, PageApp] = {}


def shared_app(name: str, folder_for: Callable[[str], Path]) -> PageApp:
    """The running shared app `name`, started (in a new folder from `folder_for(name)`) if none runs."""
    app = SHARED.get(name)
    if app is None or app.process.proc.poll() is not None:
        app = SHARED[name] = _start(name, folder_for(name))
    return app


def stop_shared(name: str) -> None:
    """Ctrl-C to the shared app `name` if it still runs: it must exit 0 without a traceback."""
    app = SHARED.pop(name, None)
    if app is None or app.process.proc.poll() is not None:
        return
    code = app.interrupt()
    assert code == 0 and "Traceback" not in app.output, app.output


@pytest.fixture(scope="session")
def shared_apps(tmp_path_factory) -> Iterator[Callable[[str], PageApp]]:
    """`get(name)`: the shared app `name` (see this module's docstring); at the end of the session, those still
    running are stopped with Ctrl-C and must exit 0 without a traceback."""
    yield lambda name: shared_app(name, tmp_path_factory.mktemp)
    for name in list(SHARED):
        stop_shared(name)


@pytest.fixture
def one_stream_app(browser, shared_apps) -> PageApp:
    """The shared one-stream page app, running (a browser is checked for first)."""
    return shared_apps("one-stream")


@pytest.fixture
def two_streams_app(browser, shared_apps) -> PageApp:
    """The shared two-streams page app, running (a browser is checked for first)."""
    return shared_apps("two-streams")
