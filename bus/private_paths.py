"""Files and folders only the assistant's user may read: the event log, the timeline and their folders.

What the assistant writes holds what the cameras saw and what people asked, so it is created private (files
0600, folders 0700). An existing one that others can read is made private when it belongs to the running user
and is the assistant's own; otherwise a warning says what to change (a shared folder is never changed).
"""

from __future__ import annotations

import errno
import logging
import os
import stat
from pathlib import Path
from typing import TextIO

logger = logging.getLogger(__name__)

OTHERS = stat.S_IRWXG | stat.S_IRWXO  # the group's and the world's bits


def make_private_dir(folder: Path, own: bool = True) -> None:
    """Creates `folder` (and missing parents) with mode 0700. If it existed and others may read or enter it:
    made 0700 when it belongs to the running user and `own` is set (a folder only the assistant uses), else a
    warning. Raises OSError when it cannot be created."""
    folder.mkdir(mode=0o700, parents=True, exist_ok=True)
    info = folder.stat()
    if not info.st_mode & OTHERS:
        return
    if own and info.st_uid == os.geteuid() and not info.st_mode & stat.S_ISVTX:
        os.chmod(folder, 0o700)
        logger.info("%s was readable by other users: made it 0700", folder)
        return
    logger.warning(
        "%s can be read by other users (mode %o); what the assistant keeps there is private to you only if you "
        "make it 0700 (chmod 700 %s) or choose a folder of your own",
        folder,
        stat.S_IMODE(info.st_mode),
        folder,
    )


def make_private_file(path: Path) -> None:
    """An existing file of ours that others can read is made 0600; someone else's gets a warning."""
    info = path.stat()
    if not info.st_mode & OTHERS:
        return
    if info.st_uid == os.geteuid():
        os.chmod(path, 0o600)
        logger.info("%s was readable by other users: made it 0600", path)
    else:
        logger.warning("%s belongs to another user and others can read it (mode %o)", path, stat.S_IMODE(info.st_mode))


def open_private_append(path: Path) -> TextIO:
    """`path` opened for appending text (UTF-8), created with mode 0600 (its missing folder with 0700); an
    existing file of ours is made 0600. Never through a symbolic link, never into a file of another user or
    anything but a regular file (someone else's file would get our events, a link would lead them elsewhere).
    Raises OSError saying why."""
    if not path.parent.exists():
        make_private_dir(path.parent)
    try:
        # non-blocking: a FIFO no one reads fails at once (ENXIO) instead of hanging the start
        flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NONBLOCK | getattr(os, "O_NOFOLLOW", 0)
        fd = os.open(path, flags, 0o600)
    except OSError as err:
        if err.errno == errno.ELOOP:
            raise OSError(err.errno, f"{path} is a symbolic link; give the file itself") from None
        if err.errno == errno.ENXIO:
            raise OSError(err.errno, f"{path} is not a regular file (a FIFO)") from None
        raise
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise OSError(errno.EINVAL, f"{path} is not a regular file")
        if info.st_uid != os.geteuid():
            raise OSError(errno.EPERM, f"{path} belongs to another user (uid {info.st_uid}); give a file of your own")
        os.set_blocking(fd, True)
        make_private_file(path)
        return os.fdopen(fd, "a", encoding="utf-8")
    except BaseException:
        os.close(fd)
        raise
