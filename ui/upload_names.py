"""An upload is shown by its file name, not by where the server keeps it: `file '/tmp/edge-assistant-page-x1/
3f9a/holiday.mp4'` reads `file 'upload:holiday.mp4'` in the page (a visitor learns nothing of the server's
folders). ui.served_files makes the run's upload folder with this prefix."""

from __future__ import annotations

import re

UPLOAD_FOLDER_PREFIX = "edge-assistant-page-"
_FOLDERS = re.compile(r"(?:/[^/'\"\s]+)*/" + re.escape(UPLOAD_FOLDER_PREFIX) + r"[^/'\"\s]*/(?:[^/'\"\s]+/)*")


def hide_upload_folder(text: str) -> str:
    """`text` with every path inside the run's upload folder cut to `upload:NAME`."""
    return _FOLDERS.sub("upload:", text)
