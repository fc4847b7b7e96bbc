"""The preview frame as a file, written once per frame for every tab.

Handing Gradio a numpy array makes it re-encode the frame for each tab and rewrite the same cache file
(named by content hash) while another tab may be downloading it, which breaks that download. Here each
new frame is encoded once, written under a temporary name and renamed into place, and only the newest
few files are kept (a long stream does not fill the disk).
"""

from __future__ import annotations

import os
import tempfile
import threading
from collections import OrderedDict
from pathlib import Path

import numpy as np
from PIL import Image

JPEG_QUALITY = 85


class PreviewFiles:
    """JPEG files of preview frames in `folder`, by preview version; keeps the newest `keep`. Thread-safe."""

    def __init__(self, folder: str | Path, keep: int = 8) -> None:
        if keep < 1:
            raise ValueError(f"keep must be >= 1 files, got {keep}")
        self.folder = Path(folder)
        self.folder.mkdir(parents=True, exist_ok=True)
        self.keep = keep
        self._paths: OrderedDict[int, Path] = OrderedDict()
        self._lock = threading.Lock()

    def path_for(self, version: int, frame: np.ndarray) -> str:
        """The file showing `frame` ([H, W, 3] uint8 RGB), the preview of `version`; written on first use."""
        with self._lock:
            path = self._paths.get(version)
            if path is None:
                path = self._write(version, frame)
                self._paths[version] = path
                while len(self._paths) > self.keep:
                    _, old = self._paths.popitem(last=False)
                    old.unlink(missing_ok=True)
            return str(path)

    def close(self) -> None:
        """Deletes the files written here (and the folder, when nothing else is in it)."""
        with self._lock:
            for path in self._paths.values():
                path.unlink(missing_ok=True)
            self._paths.clear()
            try:
                self.folder.rmdir()
            except OSError:
                pass  # not empty: another process's previews

    def _write(self, version: int, frame: np.ndarray) -> Path:
        path = self.folder / f"preview-{os.getpid()}-{version}.jpg"
        fd, tmp = tempfile.mkstemp(dir=self.folder, suffix=".tmp")
        try:
            with os.fdopen(fd, "wb") as f:
                Image.fromarray(np.ascontiguousarray(frame, dtype=np.uint8)).save(f, "JPEG", quality=JPEG_QUALITY)
            os.replace(tmp, path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
        return path
