"""One rule for every secret kept in a file (a camera's login, the page's login, the MQTT password, the webhook
key, the timeline's password): the file must be a regular file (not a link), belong to the user running the app
and be closed to group and others (chmod 600 or 400, ssh's and libpq's rule), since anyone who can read it can use
the secret. Messages name the file, never its content."""

from __future__ import annotations

import os
import stat
from pathlib import Path

MAX_SECRET_FILE_BYTES = 4096


def read_private_line(path: str | Path, what: str) -> str:
    """The first line of the private file `path` (without its line break), non-empty. ValueError starting with
    `what` (e.g. "--auth-file") and saying what to do, when the file is missing, a link, not a regular file,
    another user's, open to others, longer than a secret, not UTF-8 or empty."""
    lines = read_private_text(path, what).splitlines()
    if not lines or not lines[0]:
        raise ValueError(f"{what} {Path(path).expanduser()}: empty; its first line must hold the secret")
    return lines[0]


def read_private_text(path: str | Path, what: str, max_bytes: int = MAX_SECRET_FILE_BYTES) -> str:
    """The whole private file `path` (several secrets, one a line: the API's tokens), at most `max_bytes`; the
    same refusals as `read_private_line` but for an empty file."""
    path = Path(path).expanduser()
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
    except OSError as err:
        raise ValueError(f"{what} {path}: {err.strerror or err}") from None
    if not stat.S_ISREG(os.fstat(fd).st_mode):  # before fdopen: a folder would raise there
        os.close(fd)
        raise ValueError(f"{what} {path}: not a regular file (a folder, a device or a FIFO); give a file")
    with os.fdopen(fd, "rb") as file:
        info = os.fstat(file.fileno())
        if info.st_uid != os.geteuid():
            raise ValueError(f"{what} {path}: refused, it belongs to another user (uid {info.st_uid})")
        if info.st_mode & (stat.S_IRWXG | stat.S_IRWXO):
            raise ValueError(
                f"{what} {path}: refused, other users may read it (mode {stat.S_IMODE(info.st_mode):o}); "
                f"chmod 600 {path}"
            )
        data = file.read(max_bytes + 1)
    if len(data) > max_bytes:
        expected = "one line" if max_bytes == MAX_SECRET_FILE_BYTES else "fewer lines"
        raise ValueError(f"{what} {path}: longer than {max_bytes} bytes; expected {expected}")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise ValueError(f"{what} {path}: not UTF-8 text") from None
