"""The alerts on the web page: the shared two-streams page app (`python -m app --ui --model tiny --stream a=...
--stream b=... --config ALERTS.toml`, tests/support/ui_browser_apps.py) with a watch on stream a that always fires
(threshold 0, on_after 1), driven by headless chromium (tests/ui_browser/alerts_test.js): the banner names the
alert and its stream, the Alerts list shows its snapshot thumbnail, the stream's status its latest p_yes. The
app's clean exit on Ctrl-C is checked by its last user (tests/ui/test_ui_browser_streams.py) or at the end of the
session. The screenshot is kept in artifacts/ui-test/alerts.png (failure.png when a check failed)."""

from __future__ import annotations

from tests.support.ui_browser_apps import browser, run_page_script, shared_apps, two_streams_app

__all__ = ["browser", "shared_apps", "two_streams_app"]  # fixtures: a missing browser fails (or skips) first


def test_an_alert_that_always_fires_shows_the_banner_and_a_thumbnail_in_the_list(two_streams_app, tmp_path):
    app = two_streams_app
    seen = run_page_script("alerts_test.js", app.url, tmp_path, ["person", "a"], app.process, ["alerts.png"])
    assert "person" in seen["banner"] and "Is there a person?" in seen["banner"]
    assert seen["thumbnail"]["naturalWidth"] > 0 and seen["thumbnail"]["src"].startswith("data:image/jpeg")
    assert "Is there a person?" in seen["row"]
    assert "Traceback" not in app.output, app.output
