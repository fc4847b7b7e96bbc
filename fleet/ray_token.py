"""Ray's token authentication for the fleet (Ray >= 2.52): every Ray process of the cluster (its services, the
head's driver, the host actors) runs with `RAY_AUTH_MODE=token` and the same token, and Ray refuses a client
without it. The token lives in a file private to its user: `$RAY_AUTH_TOKEN_PATH`, else Ray's default
`~/.ray/auth_token` (so plain `ray status` finds it too, with `RAY_AUTH_MODE=token` set). The head's box makes it
once (`python -m app ray-start --head`); every other box gets a copy. No Ray import here."""

from __future__ import annotations

import os
import secrets
import stat
from collections.abc import Mapping, MutableMapping
from pathlib import Path

MODE_ENV = "RAY_AUTH_MODE"
PATH_ENV = "RAY_AUTH_TOKEN_PATH"
TOKEN_ENV = "RAY_AUTH_TOKEN"


class TokenError(Exception):
    """No usable token: missing, empty, readable by others, or token authentication switched off."""


def token_path(environ: Mapping[str, str] = os.environ) -> Path:
    """Where this box keeps the cluster's token: $RAY_AUTH_TOKEN_PATH, else ~/.ray/auth_token."""
    return Path(environ.get(PATH_ENV) or Path.home() / ".ray" / "auth_token").expanduser()


def check_token(path: Path) -> None:
    """TokenError unless `path` is a non-empty file only its owner may read."""
    try:
        info = path.stat()
    except FileNotFoundError as err:
        raise TokenError(
            f"no Ray token at {path}: on the head's box `python -m app ray-start --head ...` makes one; copy it to "
            f"this box (mode 0600), or point ${PATH_ENV} at it"
        ) from err
    if not stat.S_ISREG(info.st_mode) or info.st_size == 0:
        raise TokenError(f"the Ray token {path} is not a file with a token in it")
    if info.st_mode & 0o077:
        raise TokenError(f"the Ray token {path} may be read by other users of this machine: chmod 600 {path}")


def ensure_token(path: Path) -> bool:
    """Makes a new random token at `path` (mode 0600, its folder 0700) when there is none; True when it did.
    An existing one is kept, and checked (TokenError)."""
    if path.exists():
        check_token(path)
        return False
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as out:
        out.write(secrets.token_hex(32))  # 256 bits, as Ray's own generator makes
    return True


def use_token(environ: MutableMapping[str, str] = os.environ) -> str:
    """Sets `environ` up for token authentication (before Ray reads it) and says where the token comes from.
    TokenError when token authentication is switched off there or no private token is found."""
    mode = environ.get(MODE_ENV, "token").strip().lower()
    if mode != "token":
        raise TokenError(
            f"{MODE_ENV}={environ[MODE_ENV]!r}: the fleet runs only with Ray's token authentication (unset it, or "
            "set it to token)"
        )
    environ[MODE_ENV] = "token"
    if environ.get(TOKEN_ENV):
        return f"${TOKEN_ENV}"
    path = token_path(environ)
    check_token(path)
    environ[PATH_ENV] = str(path)
    return str(path)
