"""The parts every front door shares (app/front_door.py): the headless API and the fleet's head start without
Gradio, and only the page's options accept files from Gradio's upload folder."""

import subprocess
import sys
from pathlib import Path

import pytest

from app.cli import parse_args
from app.config import AppConfig
from app.front_door import capture_options
from app.web import capture_options as page_capture_options
from capture.policy import SourceRefused

ROOT = Path(__file__).resolve().parents[2]


def test_the_headless_api_and_the_fleets_head_never_load_gradio():
    """In a fresh interpreter (what it has imported is the point), one for both checks."""
    code = (
        "import sys, app.serve_api, fleet.serve_api, fleet.terminal; print('gradio' in sys.modules); "
        "import app.web; print('gradio' in sys.modules)"
    )
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    without_page, with_page = done.stdout.split()
    assert without_page == "False"
    assert with_page == "True", done.stderr[-2000:]  # the check has teeth: the page's module does load it


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
