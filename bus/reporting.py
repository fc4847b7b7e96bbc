"""How outputs report trouble: a one-line message to an error callback (the app publishes it as an `error`
event), also logged; a failing callback is logged, never raised into the output's thread."""

from __future__ import annotations

import logging
from collections.abc import Callable

logger = logging.getLogger(__name__)

ErrorCallback = Callable[[str], None]


def call_reporter(on_error: ErrorCallback | None, message: str) -> None:
    """Logs `message` as a warning and hands it to `on_error` (whose own failure is logged, never raised)."""
    logger.warning("%s", message)
    if on_error is None:
        return
    try:
        on_error(message)
    except Exception:
        logger.exception("the outputs' error callback failed")


def log_only(message: str) -> None:
    """A reporter that adds nothing: `call_reporter` has logged the message already (for reports an owner keeps
    out of its error events, e.g. the timeline's drops: it says what an outage lost when it writes again)."""
