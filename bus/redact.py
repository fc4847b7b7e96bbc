"""Secrets out of any text that shows or stores a source: ``redact_source(text)``.

A camera URL often carries its login: ``rtsp://admin:secret@10.0.0.5:554/stream``, or in the query string
(``?user=admin&password=secret``, ``pwd=``, ``token=``), or in a GStreamer ``rtspsrc`` property
(``user-pw=secret``). Everything that shows or stores a source (capture descriptions and errors, events, the
event log, the terminal, the timeline, the page) passes its text through ``redact_source`` first::

    redact_source("cannot open 'rtsp://admin:p%40ss@10.0.0.5/x?pwd=1'")
    # -> "cannot open 'rtsp://***@10.0.0.5/x?pwd=***'"

The URL's userinfo is everything between ``scheme://`` and the last ``@`` before the first ``/``, ``?``,
``#``, quote or blank, as FFmpeg splits it; so passwords with ``@`` are covered. A password holding ``/``,
``?`` or ``#`` must be percent-encoded in a URL anyway (FFmpeg would split it there and fail to log in).
"""

from __future__ import annotations

import dataclasses
import logging
import re
from typing import Any

from bus.events import Event

MASK = "***"

# A URL as it appears inside a larger text: scheme://, then anything up to a blank, a quote or a bracket.
_URL = re.compile(r"""\b([A-Za-z][A-Za-z0-9+.-]*://)([^\s'"<>`]*)""")
# Greedy up to the last '@' of the authority (the part before the first / ? #).
_USERINFO = re.compile(r"^[^/?#]*@")
# Query-string keys cameras and services put secrets in (matched whole, case-insensitive).
SECRET_KEYS = (
    "password",
    "passwd",
    "pass",
    "pwd",
    "psw",
    "loginpas",
    "token",
    "access_token",
    "auth",
    "authorization",
    "key",
    "api_key",
    "apikey",
    "secret",
    "signature",
    "sig",
)
_QUERY_SECRET = re.compile(r"([?&;](?:" + "|".join(SECRET_KEYS) + r")=)[^&#;]*", re.IGNORECASE)
# GStreamer properties holding passwords (rtspsrc user-pw, proxy-pw; souphttpsrc user-pw/proxy-pw).
_GST_SECRET = re.compile(r"\b((?:user|proxy)-pw\s*=\s*)(\"[^\"]*\"|'[^']*'|\S+)", re.IGNORECASE)


def _redact_url(match: re.Match[str]) -> str:
    scheme, rest = match.group(1), match.group(2)
    rest = _USERINFO.sub(MASK + "@", rest, count=1)
    return scheme + _QUERY_SECRET.sub(lambda m: m.group(1) + MASK, rest)


def redact_source(text: str) -> str:
    """``text`` with every URL's userinfo replaced by ``***`` (``rtsp://***@host/x``), the values of secret
    query parameters (``password=``, ``pwd=``, ``token=``, ...) and GStreamer ``user-pw=`` properties too.
    Idempotent; text without secrets comes back unchanged."""
    if "://" not in text and "-pw" not in text.lower():
        return text
    return _GST_SECRET.sub(lambda m: m.group(1) + MASK, _URL.sub(_redact_url, text))


def has_secret(text: str) -> bool:
    """True when ``redact_source`` would change ``text``."""
    return redact_source(text) != text


class RedactingFormatter(logging.Formatter):
    """A log formatter whose whole output (message, arguments, traceback) went through ``redact_source``:
    an exception from FFmpeg or OpenCV often quotes the URL it was given."""

    def format(self, record: logging.LogRecord) -> str:
        return redact_source(super().format(record))


def redacted(event: Event) -> Event:
    """The event with every login redacted from its text (at any depth of dataclasses, dicts, lists and
    tuples: an answer's stats hold its question and answer)."""
    return _redacted_fields(event)


def _redacted_fields(value: Any) -> Any:
    changes = {}
    for f in dataclasses.fields(value):
        field_value = getattr(value, f.name)
        clean = _redacted(field_value)
        if clean is not field_value:
            changes[f.name] = clean
    return dataclasses.replace(value, **changes) if changes else value


def _redacted(value: Any) -> Any:
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return _redacted_fields(value)
    if isinstance(value, str):
        clean = redact_source(value)
        return value if clean == value else clean
    if isinstance(value, dict):
        return {key: _redacted(v) for key, v in value.items()}
    if type(value) in (list, tuple):
        items = [_redacted(v) for v in value]
        return value if all(a is b for a, b in zip(items, value, strict=True)) else type(value)(items)
    return value
