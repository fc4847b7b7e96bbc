"""A stream's login kept apart from its URL: read from a private file or given as text, joined to the URL only
when the source is opened, so the URL that is shown, logged and stored never holds it.

A credentials file holds one line ``user:password`` (the first ``:`` separates them; the password may hold
``:``, ``@``, ``/``: it is percent-encoded when joined). It is refused unless it belongs to the running user and
no one else may read it (mode 0600 or 0400), as ssh does with its keys.
"""

from __future__ import annotations

from pathlib import Path
from urllib.parse import quote

from bus.private_file import read_private_line


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
    regular file, not the running user's, readable by others, or malformed (bus.private_file's rule)."""
    return parse_credentials(read_private_line(path, "credentials file"), f"credentials file {path}")


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
