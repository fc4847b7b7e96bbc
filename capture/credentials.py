"""A stream's login kept apart from its URL: read from a private file or given as text, joined to the URL only
when the source is opened, so the URL that is shown, logged and stored never holds it.

A credentials file holds one line ``user:password`` (the first ``:`` separates them; the password may hold
``:``, ``@``, ``/``: it is percent-encoded when joined). It is refused unless it belongs to the running user and
no one else may read it (mode 0600 or 0400), as ssh does with its keys.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path
from urllib.parse import quote

MAX_FILE_BYTES = 4096


def parse_credentials(text: str, where: str) -> tuple[str, str]:
    """``user:password`` as (user, password); ValueError naming `where` (never the text) when malformed."""
    user, sep, password = text.strip("\r\n").partition(":")
    if not sep or not user or not password:
        raise ValueError(f"{where}: expected one line user:password (both non-empty)")
    if any(ch in user + password for ch in "\r\n\0"):
        raise ValueError(f"{where}: expected one line user:password")
    return user, password


def read_credentials_file(path: str | Path) -> tuple[str, str]:
    """(user, password) from the file's first line. ValueError (with what to do) when it is missing, not a
    regular file, not the running user's, readable by others, or malformed."""
    path = Path(path).expanduser()
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
    except OSError as err:
        raise ValueError(f"credentials file {path}: {err.strerror or err}") from None
    with os.fdopen(fd, "rb") as file:
        info = os.fstat(file.fileno())
        if not stat.S_ISREG(info.st_mode):
            raise ValueError(f"credentials file {path}: not a regular file")
        if info.st_uid != os.geteuid():
            raise ValueError(f"credentials file {path}: refused, it belongs to another user (uid {info.st_uid})")
        if info.st_mode & (stat.S_IRWXG | stat.S_IRWXO):
            raise ValueError(
                f"credentials file {path}: refused, other users may read it (mode {stat.S_IMODE(info.st_mode):o}); "
                f"chmod 600 {path}"
            )
        data = file.read(MAX_FILE_BYTES + 1)
    if len(data) > MAX_FILE_BYTES:
        raise ValueError(f"credentials file {path}: longer than {MAX_FILE_BYTES} bytes; expected one line")
    try:
        first = data.decode("utf-8").splitlines()[0] if data.strip() else ""
    except UnicodeDecodeError:
        raise ValueError(f"credentials file {path}: not UTF-8 text") from None
    return parse_credentials(first, f"credentials file {path}")


def has_userinfo(url: str) -> bool:
    """True when the URL already carries a login (``scheme://user[:password]@host``)."""
    _, sep, rest = url.partition("://")
    authority = rest.split("/", 1)[0].split("?", 1)[0].split("#", 1)[0]
    return bool(sep) and "@" in authority


def with_userinfo(url: str, credentials: tuple[str, str]) -> str:
    """``scheme://host/x`` as ``scheme://user:password@host/x``, both percent-encoded."""
    scheme, sep, rest = url.partition("://")
    if not sep:
        raise ValueError("credentials apply to network URLs (rtsp://, http://, ...) only")
    user, password = credentials
    return f"{scheme}://{quote(user, safe='')}:{quote(password, safe='')}@{rest}"
