"""Secrets out of any text that shows or stores a source: ``redact_source(text)``.

A camera URL often carries its login: ``rtsp://admin:secret@10.0.0.5:554/stream``, or in the query string
(``?user=admin&password=secret``, ``pwd=``, ``p=``, ``token=``), or in a GStreamer ``rtspsrc`` property
(``user-pw=secret``). Everything that shows or stores a source (capture descriptions and errors, events, the
event log, the terminal, the timeline, the page) passes its text through ``redact_source`` first::

    redact_source("cannot open 'rtsp://admin:p%40ss@10.0.0.5/x?pwd=1'")
    # -> "cannot open 'rtsp://***@10.0.0.5/x?pwd=***'"

The text is parsed, not matched against one pattern. For every ``scheme://`` in it:

- the authority runs to the first ``/``, ``?``, ``#`` or line end, as FFmpeg splits a URL; everything before its
  last ``@`` is the userinfo and is masked. Quotes, ``<``, ``>``, backticks, blanks and ``@`` in a password are
  all inside it. (With no ``/`` after a host, a later ``@`` on the same line is masked too: safe, if ugly.)
- the URL itself runs to its closing quote or bracket when it was opened by one (``'``, ``"``, `````, ``<``,
  ``(``, ``[``; a backslash-escaped one, as ``repr`` writes it, does not close it), else to the line end;
- inside it, after the first ``?``, every parameter (separated by ``&``, ``;``, ``#`` or ``?``) whose key looks
  secret (``secret_key``) keeps its key and loses its value, up to the next separator or the URL's end.

Then GStreamer ``user-pw=`` and ``proxy-pw=`` properties lose their value (quoted with escapes, or up to a blank).
"""

from __future__ import annotations

import dataclasses
import logging
import re
from typing import Any
from urllib.parse import unquote

from bus.events import Event

MASK = "***"

# A scheme and '://', not preceded by a letter of a longer scheme.
_SCHEME = re.compile(r"(?<![A-Za-z0-9+.-])[A-Za-z][A-Za-z0-9+.-]*://")
# What closes a URL opened right after one of these.
_CLOSERS = {"'": "'", '"': '"', "`": "`", "<": ">", "(": ")", "[": "]"}
_AUTHORITY_END = re.compile(r"[/?#\n]")
_PARAM_SEPARATORS = "&;#?"
# Query keys that are secrets whole (after lower-casing and dropping '-', '_', '.') ...
SECRET_KEYS = ("p", "pw", "pin", "k", "s")
# ... and the parts that make any key a secret (``loginpas``, ``userpw``, ``access_token``, ``x-api-key``, ...).
SECRET_KEY_PARTS = ("pas", "pwd", "psw", "pw", "secret", "token", "auth", "key", "sig", "cred", "session", "cookie")
# GStreamer properties holding passwords (rtspsrc user-pw, proxy-pw; souphttpsrc user-pw/proxy-pw).
_GST_SECRET = re.compile(
    r"""\b((?:user|proxy)-pw\s*=\s*)("(?:\\.|[^"\\])*"?|'(?:\\.|[^'\\])*'?|[^\s!]+)""", re.IGNORECASE
)


def secret_key(key: str) -> bool:
    """Whether a query parameter named ``key`` holds a secret: ``key`` percent-decoded, lower-cased and without
    ``-``, ``_`` and ``.`` is one of ``SECRET_KEYS`` or contains one of ``SECRET_KEY_PARTS``. Wide on purpose:
    hiding a harmless value costs a little readability, showing a password costs the camera."""
    name = re.sub(r"[-_.\s]", "", unquote(key).lower())
    return name in SECRET_KEYS or any(part in name for part in SECRET_KEY_PARTS)


def _url_end(text: str, start: int, opener: str) -> int:
    """Where a URL starting at ``start`` ends: at its unescaped closer when ``opener`` is a quote or bracket,
    else (or when the closer is missing) at the line end."""
    line_end = text.find("\n", start)
    line_end = len(text) if line_end < 0 else line_end
    closer = _CLOSERS.get(opener)
    if closer is None:
        return line_end
    i = start
    while i < line_end:
        if text[i] == "\\":
            i += 2
            continue
        if text[i] == closer:
            return i
        i += 1
    return line_end


def _redact_query(url: str) -> str:
    """``url`` (no userinfo) with the value of every secret parameter after its first ``?`` masked."""
    q = url.find("?")
    if q < 0:
        return url
    out, i = [url[: q + 1]], q + 1
    while i <= len(url):
        j = i
        while j < len(url) and url[j] not in _PARAM_SEPARATORS:
            j += 1
        param = url[i:j]
        key, eq, _ = param.partition("=")
        out.append(key + eq + MASK if eq and secret_key(key) else param)
        if j < len(url):
            out.append(url[j])
        i = j + 1
    return "".join(out)


def _redact_urls(text: str) -> str:
    out, i = [], 0
    while (m := _SCHEME.search(text, i)) is not None:
        out.append(text[i : m.end()])
        start = m.end()
        auth = _AUTHORITY_END.search(text, start)
        auth_end = auth.start() if auth else len(text)
        at = text.rfind("@", start, auth_end)
        if at >= 0:
            out.append(MASK)
            start = at  # the '@' and the host stay
        opener = text[m.start() - 1] if m.start() > 0 else ""
        end = _url_end(text, start, opener)
        # A URL inside this one (an FFmpeg message quoting it again) is looked at again by itself.
        inner = _SCHEME.search(text, start, end)
        if inner is not None and inner.start() > start:
            end = inner.start()
        out.append(_redact_query(text[start:end]))
        i = end
    out.append(text[i:])
    return "".join(out)


def redact_source(text: str) -> str:
    """``text`` with every URL's userinfo replaced by ``***`` (``rtsp://***@host/x``), the values of secret
    query parameters (``password=``, ``pwd=``, ``p=``, ``token=``, ...; see ``secret_key``) and GStreamer
    ``user-pw=`` properties too. Idempotent; text without secrets comes back unchanged."""
    if "://" not in text and "-pw" not in text.lower():
        return text
    return _GST_SECRET.sub(lambda m: m.group(1) + MASK, _redact_urls(text))


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
