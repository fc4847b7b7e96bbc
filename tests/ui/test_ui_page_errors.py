"""The page's refusals tell nobody which files exist: typed paths that are missing, a folder, empty, not a video or
unreadable get one message (only the typed text differs), and no absolute path the person did not type is shown.
The sources are opened for real by the capture (`open_source`), as the assistant does."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from capture import CaptureConfig, open_source
from capture.options import CaptureOptions
from capture.synth import write_video
from ui import render
from ui.controls import Controls
from ui.state import LiveState
from ui.upload_names import hide_upload_folder
from watches.scheduler import StandingQuestion


class OpeningAssistant:
    """Opens the source as `Assistant.watch` does (SourceError for a bad one), then closes it."""

    def __init__(self) -> None:
        self.schedule = StandingQuestion("What now?", every_s=30)
        self.stream_time = 0.0
        self.watched: list[str] = []

    def watch(self, capture_config: CaptureConfig, stream=None) -> None:
        open_source(capture_config).close()
        self.watched.append(str(capture_config.source))

    def add_stream(self, name: str, capture_config: CaptureConfig) -> str:
        self.watch(capture_config)
        return "fits"


def controls() -> tuple[OpeningAssistant, Controls]:
    assistant = OpeningAssistant()
    return assistant, Controls(assistant, LiveState(), CaptureOptions(max_size=(64, 64)), max_upload_bytes=2**30)


def bad_files(folder: Path) -> dict[str, Path]:
    (folder / "a-folder.mp4").mkdir()
    (folder / "empty.mp4").write_bytes(b"")
    (folder / "notes.mp4").write_text("not a video at all\n" * 50)
    unreadable = folder / "secret.mp4"
    unreadable.write_bytes(os.urandom(4096))
    unreadable.chmod(0)
    return {
        "missing": folder / "missing.mp4",
        "folder": folder / "a-folder.mp4",
        "empty": folder / "empty.mp4",
        "not a video": folder / "notes.mp4",
        "unreadable": unreadable,
    }


def test_a_typed_path_that_does_not_exist_reads_like_one_that_is_not_a_video(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    messages = {}
    for what, path in bad_files(tmp_path).items():
        assistant, page = controls()
        feedback = page.start("path or URL", None, path.name, 0)  # typed relative to the working directory
        assert not feedback.ok and assistant.watched == [], what
        messages[what] = feedback.message.replace(path.name, "NAME")
        assert str(tmp_path) not in feedback.message, (what, feedback.message)
    assert len(set(messages.values())) == 1, messages


def test_a_good_typed_path_is_still_watched(tmp_path):
    video = tmp_path / "ok.mp4"
    write_video(video, size=(64, 48), fps=4, duration_s=1.0, options={"preset": "ultrafast"})
    assistant, page = controls()
    assert page.start("path or URL", None, str(video), 0).ok and assistant.watched == [str(video)]


@pytest.mark.parametrize("kind", ["start", "add"])
def test_a_broken_upload_names_its_file_but_not_the_upload_folder(tmp_path, kind):
    upload = tmp_path / "gradio-upload-3f9a" / "holiday.mp4"
    upload.parent.mkdir()
    upload.write_text("not a video at all\n" * 50)
    _, page = controls()
    if kind == "start":
        feedback = page.start("file upload", str(upload), "", 0)
    else:
        feedback = page.add_stream("b", "file upload", str(upload), "", 0)
    assert not feedback.ok and "holiday.mp4" in feedback.message
    assert str(tmp_path) not in feedback.message and "gradio-upload-3f9a" not in feedback.message


def test_an_uploaded_source_is_shown_by_its_name_not_the_servers_folder():
    live = LiveState()
    path = "/tmp/edge-assistant-page-k2j4/3f9a0c/my holiday.mp4"
    live.note("status", f"main · watching file '{path}'", 0.0)
    log = render.log_markdown(live.snapshot().log)
    assert "my holiday.mp4" in log and "upload" in log
    assert "/tmp" not in log and "edge-assistant-page" not in log and "3f9a0c" not in log
    assert hide_upload_folder("file '/home/me/clips/a.mp4'") == "file '/home/me/clips/a.mp4'"  # typed: kept
