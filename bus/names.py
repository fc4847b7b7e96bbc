"""The one naming rule for streams and watches. A name appears in event logs, terminal prefixes, MQTT topics and
file names, so it is kept to what is safe in all of them."""

from __future__ import annotations

import re

NAME_PATTERN = re.compile(r"^[a-z0-9][a-z0-9_-]{0,31}$")
NAME_RULE = "lowercase letters, digits, '_' and '-', starting with a letter or digit, at most 32 characters"


def check_name(name: object) -> str:
    """`name` if it follows the rule; ValueError saying the rule otherwise."""
    if not isinstance(name, str) or not NAME_PATTERN.fullmatch(name):
        raise ValueError(f"bad stream name {name!r}: use {NAME_RULE}")
    return name
