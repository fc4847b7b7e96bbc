"""The parts every front door shares (app/front_door.py): the headless API and the fleet's head start without
Gradio, and only the page's options accept files from Gradio's upload folder."""

import pytest

from app.cli import parse_args
from app.config import AppConfig
from app.front_door import capture_options
from app.web import capture_options as page_capture_options
from capture.policy import SourceRefused
from tests.support.fresh_imports import loaded_after_imports


def test_the_headless_api_and_the_fleets_head_never_load_gradio():
    """In a fresh interpreter (what it has imported is the point; tests/support/fresh_imports.py)."""
    headless, everything = loaded_after_imports()
    assert headless["gradio"] is False
    assert everything["gradio"] is True  # the check has teeth: the page's module does load it


def test_only_the_page_accepts_files_from_its_upload_folder(tmp_path, monkeypatch):
    monkeypatch.setenv("GRADIO_TEMP_DIR", str(tmp_path / "uploads"))
    uploaded = tmp_path / "uploads" / "abc" / "clip.mp4"
    uploaded.parent.mkdir(parents=True)
    uploaded.write_bytes(b"not read")
    config = AppConfig.from_args(parse_args(["--video", "x.mp4", "--timeline", ""]))
    assert page_capture_options(config, None).policy.check(str(uploaded), uploaded=True) == str(uploaded)
    with pytest.raises(SourceRefused, match="only files uploaded through the page"):
        capture_options(config, None).policy.check(str(uploaded), uploaded=True)
    assert capture_options(config, (64, 48)).max_size == (64, 48)
