"""The bus that fans events out to their subscribers."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

from bus.events import Event

logger = logging.getLogger(__name__)

Subscriber = Callable[[Event], None]


class EventBus:
    """Delivers each event to every subscriber, in the publishing thread. A failing subscriber is logged
    and skipped: a broken display must not stop the model."""

    def __init__(self) -> None:
        self._subscribers: list[Subscriber] = []
        self._lock = threading.Lock()

    def subscribe(self, subscriber: Subscriber) -> None:
        with self._lock:
            self._subscribers.append(subscriber)

    def unsubscribe(self, subscriber: Subscriber) -> None:
        with self._lock:
            if subscriber in self._subscribers:
                self._subscribers.remove(subscriber)

    def publish(self, event: Event) -> None:
        with self._lock:
            subscribers = list(self._subscribers)
        for subscriber in subscribers:
            try:
                subscriber(event)
            except Exception:
                logger.exception("event subscriber %r failed on a %s event", subscriber, event.TYPE)
