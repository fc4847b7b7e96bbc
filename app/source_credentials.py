"""Where a configured stream's login comes from, so it need not sit in argv (seen by every local user through
`ps`) or in a TOML file: the environment variable `EDGE_ASSISTANT_SOURCE_CREDENTIALS_<NAME>` (the stream's name
upper-cased, `-` as `_`) holding `user:password`, or a credentials file (`credentials_file` in `[streams.NAME]`,
`--stream-credentials-file NAME=PATH`) holding that one line, private to the running user.

Only streams configured at start get a login this way: a source typed in the page or the terminal never
receives one (it could point anywhere and would collect it).
"""

from __future__ import annotations

import os
from collections.abc import Mapping

from app.streams import StreamSpec
from capture.credentials import parse_credentials, read_credentials_file

ENV_PREFIX = "EDGE_ASSISTANT_SOURCE_CREDENTIALS_"


def env_name(stream: str) -> str:
    """`door` -> `EDGE_ASSISTANT_SOURCE_CREDENTIALS_DOOR`, `back-yard` -> `..._BACK_YARD`."""
    return ENV_PREFIX + stream.upper().replace("-", "_")


def stream_credentials(spec: StreamSpec, environ: Mapping[str, str] = os.environ) -> tuple[str, str] | None:
    """(user, password) for `spec` from its environment variable or its credentials file; None when neither
    is set. ValueError (never quoting the secret) when both are, or when the one given is unusable."""
    variable = env_name(spec.name)
    from_env = environ.get(variable)
    if from_env is not None and spec.credentials_file is not None:
        raise ValueError(f"stream {spec.name!r}: both {variable} and a credentials file are set; give one")
    if from_env is not None:
        return parse_credentials(from_env, variable)
    if spec.credentials_file is not None:
        return read_credentials_file(spec.credentials_file)
    return None
