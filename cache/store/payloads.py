"""Where the host store keeps its blocks' keys and values: in RAM (the default) or as files in a folder.

A payload is a dict of tensors (plain or quantised keys and values). The folder is checked when the store
is built (`check_folder`: exists, writable, room for the store's bound), so a bad `--store-dir` is a clear
error at start; a failure later (the disk fills, the folder goes away) raises OSError from `put`/`get`,
which the store turns into an error event and RAM-only storage.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import weakref
from pathlib import Path

import torch

Payload = dict[str, torch.Tensor]


class StoreFolderError(ValueError):
    """The store folder cannot be used; the message says why and what to do."""


def check_folder(folder: Path, max_bytes: int) -> None:
    """Raises StoreFolderError unless `folder` exists, takes a file, and has `max_bytes` free."""
    ram_hint = "or leave out --store-dir to keep the store in RAM"
    if not folder.exists():
        raise StoreFolderError(f"store folder {folder} does not exist: create it (mkdir -p {folder}) {ram_hint}")
    if not folder.is_dir():
        raise StoreFolderError(f"store folder {folder} is not a folder: give a folder path {ram_hint}")
    try:
        with tempfile.TemporaryFile(dir=folder) as probe:
            probe.write(b"edge-stream-assistant")
            probe.flush()
            os.fsync(probe.fileno())
    except OSError as e:
        raise StoreFolderError(
            f"cannot write to store folder {folder} ({e.strerror or e}): choose a writable folder {ram_hint}"
        ) from e
    free = shutil.disk_usage(folder).free
    if free < max_bytes:
        raise StoreFolderError(
            f"store folder {folder} has {free / 2**20:.0f} MiB free, but the store may grow to "
            f"{max_bytes / 2**20:.0f} MiB: lower --store-mb or free some space"
        )


class RamPayloads:
    where = "ram"

    def __init__(self) -> None:
        self._items: dict[int, Payload] = {}

    def put(self, key: int, payload: Payload) -> None:
        self._items[key] = payload

    def get(self, key: int) -> Payload:
        return self._items[key]

    def drop(self, key: int) -> None:
        self._items.pop(key, None)

    def clear(self) -> None:
        self._items.clear()


class FolderPayloads:
    """One file per block in a fresh subfolder of `folder`, removed when the store is reset or collected."""

    where = "disk"

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.path = Path(tempfile.mkdtemp(prefix="kv-store-", dir=folder))
        self._cleanup = weakref.finalize(self, shutil.rmtree, self.path, ignore_errors=True)

    def _file(self, key: int) -> Path:
        return self.path / f"{key}.pt"

    def put(self, key: int, payload: Payload) -> None:
        file = self._file(key)
        try:
            torch.save(payload, file)
        except (OSError, RuntimeError) as e:  # torch wraps some write errors in RuntimeError
            self.drop(key)  # no half-written file left behind
            if isinstance(e, OSError):
                raise
            raise OSError(str(e)) from e

    def get(self, key: int) -> Payload:
        try:
            return torch.load(self._file(key), weights_only=True)
        except (RuntimeError, EOFError) as e:
            raise OSError(f"{self._file(key)} is unreadable: {e}") from e

    def drop(self, key: int) -> None:
        try:
            self._file(key).unlink(missing_ok=True)
        except OSError:
            pass  # the folder went away: nothing left to free

    def clear(self) -> None:
        self._cleanup()
