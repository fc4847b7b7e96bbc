"""The page's files (uploads, preview frames, Gradio's cache) in a folder of this run's own: created private
(0700, readable by no other user) and removed, with everything in it, when the page closes."""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from ui.upload_names import UPLOAD_FOLDER_PREFIX

GRADIO_TEMP_ENV = "GRADIO_TEMP_DIR"  # Gradio reads it whenever it needs its folder (gradio.utils.get_upload_folder)


@contextmanager
def private_upload_folder() -> Iterator[Path]:
    """Points Gradio at a fresh private folder while the page is built and served; removes it at exit.
    Enter it before the page (gr.Blocks) is built: a Blocks keeps the folder it was made with."""
    folder = Path(tempfile.mkdtemp(prefix=UPLOAD_FOLDER_PREFIX))  # mkdtemp: mode 0700
    previous = os.environ.get(GRADIO_TEMP_ENV)
    os.environ[GRADIO_TEMP_ENV] = str(folder)
    try:
        yield folder
    finally:
        if previous is None:
            os.environ.pop(GRADIO_TEMP_ENV, None)
        else:
            os.environ[GRADIO_TEMP_ENV] = previous
        shutil.rmtree(folder, ignore_errors=True)
