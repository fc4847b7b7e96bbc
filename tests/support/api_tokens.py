"""API tokens for tests: as strong as the server asks (api/config.py: 16 characters or more, 8 different at
least), each told apart by its label and the same in every run."""

from __future__ import annotations

import hashlib


def make_token(label: str) -> str:
    """`label-` and 24 hex digits of the label's SHA-256, e.g. make_token("reader")."""
    return f"{label}-{hashlib.sha256(label.encode()).hexdigest()[:24]}"
