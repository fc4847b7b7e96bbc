"""Secrets for outputs (an MQTT password, a webhook's HMAC key) come from an environment variable or a
file, never from the command line: a command line is visible to every user of the machine (`ps`)."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

MQTT_USERNAME_ENV = "EDGE_ASSISTANT_MQTT_USERNAME"
MQTT_PASSWORD_ENV = "EDGE_ASSISTANT_MQTT_PASSWORD"
WEBHOOK_SECRET_ENV = "EDGE_ASSISTANT_WEBHOOK_SECRET"


def read_secret(path: str | Path | None, env_name: str, env: Mapping[str, str] | None = None) -> str | None:
    """The secret in the file `path` (its first line, without the line break) if given, else the value of
    the environment variable `env_name`, else None. An unreadable or empty file raises ValueError (the
    message names the file, never its content)."""
    if path is not None:
        try:
            text = Path(path).read_text(encoding="utf-8")
        except OSError as exc:
            raise ValueError(f"cannot read the secret file {path}: {exc.strerror or exc}") from None
        lines = text.splitlines()
        secret = lines[0] if lines else ""
        if not secret:
            raise ValueError(f"the secret file {path} is empty: its first line must hold the secret")
        return secret
    value = (os.environ if env is None else env).get(env_name)
    return value or None
