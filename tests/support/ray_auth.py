"""Ray's token authentication for every Ray test cluster and driver of a test session, as the fleet runs on real
boxes (fleet/ray_token.py): one private token in a temporary folder, named by `RAY_AUTH_TOKEN_PATH`, with
`RAY_AUTH_MODE=token`. Set by conftest before Ray is imported (Ray reads them once per process)."""

from __future__ import annotations

import atexit
import shutil
import tempfile
from pathlib import Path

from fleet.ray_token import MODE_ENV, PATH_ENV, ensure_token


def ray_auth_env() -> dict[str, str]:
    """The environment that turns token authentication on, with a fresh token (removed when the session ends)."""
    folder = Path(tempfile.mkdtemp(prefix="ray-token-"))
    atexit.register(shutil.rmtree, folder, ignore_errors=True)
    ensure_token(folder / "auth_token")
    return {MODE_ENV: "token", PATH_ENV: str(folder / "auth_token")}


# Ray's driver tries to reach the GCS 20 times a second apart (RAY_NUM_REDIS_GET_RETRIES) before it gives up, even
# when the GCS answered each time that the token is wrong: 20 s of nothing per refused driver. Two tries say the same.
REFUSED_TRIES = {"RAY_NUM_REDIS_GET_RETRIES": "2"}


def without_token(environ: dict[str, str]) -> dict[str, str]:
    """`environ` as a driver that does not have the cluster's token sees it."""
    return {k: v for k, v in environ.items() if not k.startswith("RAY_AUTH")}


def outsider(environ: dict[str, str]) -> dict[str, str]:
    """`environ` of a driver without the cluster's token that gives up after REFUSED_TRIES (only for a driver: a
    node started so would give its own GCS two seconds)."""
    return {**without_token(environ), **REFUSED_TRIES}
