"""Secrets for outputs (an MQTT password, a webhook's HMAC key) come from an environment variable or a
file, never from the command line: a command line is visible to every user of the machine (`ps`)."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

from bus.private_file import read_private_line

MQTT_USERNAME_ENV = "EDGE_ASSISTANT_MQTT_USERNAME"
MQTT_PASSWORD_ENV = "EDGE_ASSISTANT_MQTT_PASSWORD"
WEBHOOK_SECRET_ENV = "EDGE_ASSISTANT_WEBHOOK_SECRET"


def read_secret(path: str | Path | None, env_name: str, env: Mapping[str, str] | None = None) -> str | None:
    """The secret in the file `path` (its first line, without the line break) if given, else the value of
    the environment variable `env_name`, else None. A file that is unreadable, empty or open to other users
    raises ValueError (bus.private_file's rule; the message names the file, never its content)."""
    if path is not None:
        return read_private_line(path, "secret file")
    value = (os.environ if env is None else env).get(env_name)
    return value or None
