"""An event's receipt: what says when every output that took an event has finished with it.

A fleet's head acknowledges a spooled alert or answer to its host only once its outputs are done with it (docs/
fleet.md, "Nothing lost"), not when it hands it to them. So the head publishes such an event with a `Receipt`
(`Event.receipt`), and every output that queues the event `hold`s it and `release`s it once it is done: delivered,
or given up on (its retries spent, dropped from a full queue, abandoned at close; each of those is counted and
reported where it happens). The receipt starts held once by its publisher, who releases that hold after
`bus.publish` returned (every subscriber has taken what it wanted by then); when the last hold goes, `on_done`
runs, once, on the thread that released it.

An output holds only while it holds the event already (the bus's subscriber during `publish`, a sink on the
publisher's thread while the publisher holds it), so the count never reaches zero and rises again. `key` names the
event for good (the same in every run that delivers it: `<spool id>:<seq>`): the timeline keeps it once, the broker
and webhooks carry it so a receiver can drop a repeat.

An output that delivered an event (the broker's PUBACK, a 2xx answer) marks it (`mark_delivered`) before it
releases it, and skips a replayed event it finds marked (`delivered_before`): with the head's `DeliveryMarks`
(bus/delivery_marks.py) a new head does not send again what an output delivered before the old one died.

Events without a receipt (every event of a one-box run, a fleet's clips and statuses) need nothing: `hold`,
`release`, `mark_delivered` and `delivered_before` take the event and do nothing when it has none.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from bus.delivery_marks import DeliveryMarks

logger = logging.getLogger(__name__)


class Receipt:
    """key: the event's durable name; on_done: called once when the last hold is released (it should not raise:
    an exception is logged); marks: where the outputs mark what they delivered (None: nowhere)."""

    def __init__(self, key: str, on_done: Callable[[], None], marks: DeliveryMarks | None = None) -> None:
        self.key = key
        self.marks = marks
        self._on_done: Callable[[], None] | None = on_done
        self._holds = 1  # the publisher's own
        self._lock = threading.Lock()

    @property
    def done(self) -> bool:
        with self._lock:
            return self._holds == 0

    def hold(self) -> None:
        """One more output took the event."""
        with self._lock:
            if self._holds == 0:
                raise RuntimeError(f"receipt {self.key}: held after every output was done with it")
            self._holds += 1

    def release(self) -> None:
        """An output is done with the event (delivered, or given up on)."""
        with self._lock:
            if self._holds == 0:
                raise RuntimeError(f"receipt {self.key}: released more often than held")
            self._holds -= 1
            if self._holds:
                return
            on_done, self._on_done = self._on_done, None
        try:
            on_done()
        except Exception:
            logger.exception("receipt %s: its completion failed", self.key)

    def delivered_before(self, output: str) -> bool:
        """Whether `output` delivered this event already (in an earlier run of the head)."""
        return self.marks is not None and self.marks.has(output, self.key)

    def mark_delivered(self, output: str) -> None:
        """`output` delivered this event: a later run does not send it there again."""
        if self.marks is not None:
            self.marks.add(output, self.key)

    def __repr__(self) -> str:
        return f"Receipt({self.key!r}, holds={self._holds})"


def receipt_of(item: Any) -> Receipt | None:
    """The receipt an event carries (None: none, or not an event)."""
    receipt = getattr(item, "receipt", None)
    return receipt if isinstance(receipt, Receipt) else None


def hold(item: Any) -> None:
    """`item`'s receipt held, if it carries one."""
    receipt = receipt_of(item)
    if receipt is not None:
        receipt.hold()


def release(item: Any) -> None:
    """`item`'s receipt released, if it carries one."""
    receipt = receipt_of(item)
    if receipt is not None:
        receipt.release()


def key_of(item: Any) -> str | None:
    """The durable key of an event's receipt (None without one)."""
    receipt = receipt_of(item)
    return None if receipt is None else receipt.key


def delivered_before(item: Any, output: str) -> bool:
    """Whether `output` delivered `item` before (False for an event without a receipt)."""
    receipt = receipt_of(item)
    return receipt is not None and receipt.delivered_before(output)


def mark_delivered(item: Any, output: str) -> None:
    """`output` delivered `item` (nothing for an event without a receipt)."""
    receipt = receipt_of(item)
    if receipt is not None:
        receipt.mark_delivered(output)
