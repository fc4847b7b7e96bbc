"""Where the CPU kernels are built, once per machine, and why a library found there is safe to load.

The kernels are a shared library the process loads and runs: whoever can write it runs code as the assistant's
user. So they live in a folder of their own (not the data folder, which a test or a benchmark points elsewhere):
`$EDGE_ASSISTANT_KERNEL_CACHE`, else `~/.cache/edge-stream-assistant-kernels`, one subfolder per torch version
and version of the sources. Before a build or a load every folder from that root down must be a real folder (no
link), owned by the running user and closed to everyone else (0700, created so whatever the umask); the root's
parent must not let others rename it (not writable by others, or sticky like /tmp). Anything else is refused with
the folder named and how to fix it: the assistant then runs on SDPA and MKL. A built library's SHA-256 is kept
beside it; a library that does not match (a build killed while writing, a file changed since) is rebuilt.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import stat
from pathlib import Path

CACHE_VARIABLE = "EDGE_ASSISTANT_KERNEL_CACHE"
DIGEST_FILE = "library.sha256"


class UnsafeKernelFolder(OSError):
    """A kernel folder others could write to or that is not the user's own: nothing in it is loaded."""


def kernel_cache_root() -> Path:
    default = Path.home() / ".cache" / "edge-stream-assistant-kernels"
    return Path(os.environ.get(CACHE_VARIABLE) or default).absolute()


def private_build_folder(root: Path, name: str) -> Path:
    """`root / name`, created 0700 where missing, after checking `root`'s parent, `root` and the folder itself
    (UnsafeKernelFolder: what is wrong and how to fix it)."""
    root.parent.mkdir(parents=True, exist_ok=True)  # ~/.cache as any program makes it
    _check_parent(root.parent)
    folder = root / name
    for path in (root, folder):
        try:
            path.mkdir(mode=0o700)
            os.chmod(path, 0o700)  # mkdir's mode passes through the umask; this one does not
        except FileExistsError:
            pass
        _check_own(path)
    return folder


def library_matches(folder: Path, library: Path) -> bool:
    """Whether `library` is the one recorded after its build (False: none recorded, or it changed since)."""
    try:
        recorded = (folder / DIGEST_FILE).read_text().strip()
        _check_own(library, folder=False)
    except (OSError, UnicodeDecodeError):
        return False
    return recorded == _sha256(library)


def record_library(folder: Path, library: Path) -> None:
    (folder / DIGEST_FILE).write_text(_sha256(library) + "\n")


def discard_build(folder: Path, keep: str = "") -> None:
    """Empties the folder but for `keep` (a library that does not match its record is not trusted, nor what built
    it; the build lock the caller holds stays)."""
    for entry in folder.iterdir():
        if entry.name == keep:
            continue
        if entry.is_dir() and not entry.is_symlink():
            shutil.rmtree(entry)
        else:
            entry.unlink()


def _check_parent(parent: Path) -> None:
    info = parent.stat()
    if info.st_mode & (stat.S_IWGRP | stat.S_IWOTH) and not info.st_mode & stat.S_ISVTX:
        raise UnsafeKernelFolder(
            f"the CPU kernels' folder lies in {parent}, which other users may write to (mode "
            f"{stat.S_IMODE(info.st_mode):o}): set {CACHE_VARIABLE} to a folder of your own"
        )


def _check_own(path: Path, folder: bool = True) -> None:
    info = os.lstat(path)
    if folder and not stat.S_ISDIR(info.st_mode):
        raise UnsafeKernelFolder(f"{path} is not a folder (a link or a file): remove it, the kernels build again")
    if info.st_uid != os.geteuid():
        raise UnsafeKernelFolder(
            f"{path} belongs to another user (uid {info.st_uid}): the CPU kernels are loaded only from a folder "
            f"of yours; remove it or set {CACHE_VARIABLE} to a folder of your own"
        )
    if info.st_mode & (stat.S_IWGRP | stat.S_IWOTH) or (folder and info.st_mode & (stat.S_IRWXG | stat.S_IRWXO)):
        raise UnsafeKernelFolder(
            f"{path} is open to other users (mode {stat.S_IMODE(info.st_mode):o}): make it private "
            f"(chmod {'700' if folder else '600'} {path}) or remove it, and the kernels build again"
        )


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()
