"""Uploads are bounded while the page runs: video files only (by extension), at most --max-upload-mb each, at
most --max-uploads files and --max-upload-total-mb in all per run; a refused upload leaves nothing on disk and
says why. A live server on 127.0.0.1, logged in."""

from __future__ import annotations

import os
from pathlib import Path

import httpx
import pytest

from app.cli import parse_args
from app.config import AppConfig, UIConfig
from tests.support.harden_page_helpers import LOGIN, PASSWORD, free_port, login, served
from ui.access import AUTH_ENV

MIB = 2**20


def video(size: int = 16) -> bytes:
    """Bytes unlike any other upload's (Gradio files uploads by their content)."""
    return os.urandom(size)


def ui(**limits) -> UIConfig:
    return UIConfig(port=free_port(), auth=(LOGIN.user, PASSWORD), **limits)


def upload(client: httpx.Client, base: str, *files: tuple[str, bytes]) -> httpx.Response:
    return client.post(f"{base}/gradio_api/upload", files=[("files", item) for item in files], timeout=60)


def kept(page, before: frozenset[Path] = frozenset(), among: tuple[str, ...] = ()) -> list[str]:
    """The names of the files in the page's upload folder (Gradio's, shared by this process) but not `before`;
    with `among`, only those names (an earlier test's uploads have turned up after its end: once in a CI run,
    the file before's c1.mp4 and c2.mp4 in the next test's folder)."""
    files = {p for p in Path(page.server_app.uploaded_file_dir).rglob("*") if p.is_file()}
    return sorted(p.name for p in files - before if not among or p.name in among)


def files(page) -> frozenset[Path]:
    return frozenset(p for p in Path(page.server_app.uploaded_file_dir).rglob("*") if p.is_file())


@pytest.fixture
def person():
    with httpx.Client() as client:
        yield client


def test_only_video_files_are_accepted(person):
    with served(ui(max_upload_mb=1)) as (base, page):
        assert login(person, base, PASSWORD) == 200
        refused = upload(person, base, ("notes.txt", video()))
        assert refused.status_code == 415 and ".mp4" in refused.text and "notes.txt" in refused.text
        refused = upload(person, base, ("clip.mp4", video()), ("run.sh", video()))
        assert refused.status_code == 415 and "run.sh" in refused.text
        assert "notes.txt" not in kept(page) and "clip.mp4" not in kept(page) and "run.sh" not in kept(page)
        assert upload(person, base, ("Clip.MP4", video())).status_code == 200


def test_a_file_over_the_size_limit_is_refused(person):
    with served(ui(max_upload_mb=1)) as (base, page):
        assert login(person, base, PASSWORD) == 200
        assert upload(person, base, ("big.mp4", video(MIB + 10))).status_code == 413
        assert "big.mp4" not in kept(page)


def test_at_most_so_many_uploads_per_run(person):
    with served(ui(max_upload_mb=1, max_uploads=3)) as (base, page):
        before = files(page)
        assert login(person, base, PASSWORD) == 200
        assert [upload(person, base, (f"c{i}.mp4", video())).status_code for i in range(3)] == [200, 200, 200]
        refused = upload(person, base, ("c3.mp4", video()))
        assert refused.status_code == 413 and "--max-uploads" in refused.text
        assert upload(person, base, ("a.mp4", video()), ("b.mp4", video())).status_code == 413
        assert kept(page, before, among=("c0.mp4", "c1.mp4", "c2.mp4", "c3.mp4", "a.mp4", "b.mp4")) == [
            "c0.mp4",
            "c1.mp4",
            "c2.mp4",
        ]


def test_at_most_so_many_bytes_per_run(person):
    with served(ui(max_upload_mb=1, max_upload_total_mb=2)) as (base, page):
        before = files(page)
        assert login(person, base, PASSWORD) == 200
        part = MIB * 9 // 10
        assert upload(person, base, ("a.mp4", video(part))).status_code == 200
        assert upload(person, base, ("b.mp4", video(part))).status_code == 200
        refused = upload(person, base, ("c.mp4", video(part)))
        assert refused.status_code == 413 and "--max-upload-total-mb" in refused.text
        assert kept(page, before, among=("a.mp4", "b.mp4", "c.mp4")) == ["a.mp4", "b.mp4"]
        assert upload(person, base, ("tiny.mp4", video(1000))).status_code == 200  # what is left still fits


def test_the_flags_reach_the_config(monkeypatch):
    monkeypatch.delenv(AUTH_ENV, raising=False)
    config = AppConfig.from_args(parse_args(["--ui", "--max-uploads", "5", "--max-upload-total-mb", "100"]))
    assert (config.ui.max_uploads, config.ui.max_upload_total_mb) == (5, 100)
    defaults = AppConfig.from_args(parse_args(["--ui"])).ui
    assert defaults.max_uploads == 20 and defaults.max_upload_total_mb == 2000
    with pytest.raises(SystemExit):
        parse_args(["--ui", "--max-uploads", "many"])
    with pytest.raises(ValueError, match="--max-uploads"):
        AppConfig.from_args(parse_args(["--ui", "--max-uploads", "0"]))
