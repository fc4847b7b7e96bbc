"""The web demo end to end: the shared one-stream page app (`python -m app --ui --model tiny --stream a=<live
file>`, tests/support/ui_browser_apps.py) driven by Debian's headless chromium through playwright-core
(tests/ui_browser/page_test.js). Ctrl-C stopping it cleanly is checked by its last user
(tests/ui/test_ui_browser_watches.py).

Needs chromium and node with playwright-core: `bash .ci/ui_setup.sh` installs both. Without them the test
fails (it is part of CI); set EDGE_ASSISTANT_ALLOW_NO_BROWSER=1 to skip it instead on a machine without them.
The screenshot is kept in artifacts/ui-test/page.png (failure.png when a check failed).
"""

from __future__ import annotations

from tests.support.ui_browser_apps import (
    ARTIFACTS,
    BROWSER_DIR,
    CHROMIUM,
    REPO,
    AppProcess,
    browser,
    browser_missing,
    drive_app,
    free_port,
    one_stream_app,
    run_page_script,
    shared_apps,
)

# the helpers the other browser tests import from here (tests/fleet, tests/ui/test_ui_page_served.py), and fixtures
__all__ = [
    "ARTIFACTS",
    "BROWSER_DIR",
    "CHROMIUM",
    "REPO",
    "AppProcess",
    "browser",
    "browser_missing",
    "drive_app",
    "free_port",
    "one_stream_app",
    "run_page_script",
    "shared_apps",
]


def test_the_page_streams_answers_plots_memory_and_survives_a_bad_url(one_stream_app, tmp_path):
    app = one_stream_app
    bad_url = f"http://127.0.0.1:{free_port()}/missing.mp4"
    video = app.videos["a"]
    seen = run_page_script("page_test.js", app.url, tmp_path, [bad_url, str(video)], app.process, ["page.png"])
    assert "[auto]" not in seen["typedAnswers"][0]
    assert seen["streamTimeAfterError"] > seen["firstStreamTime"]
    assert "cannot watch it" in seen["badUrlMessage"]
    assert video.name in seen["statusAfterUpload"]
    assert (tmp_path / "page.png").stat().st_size > 10_000
    assert "Traceback" not in app.output, app.output
