"""What the head delivered of the hosts' spools (fleet/spool.py): each spooled event handed to the outputs once,
and acknowledged back to its host only once every output that took it is done with it.

A spooled event carries `_spool: [spool id, seq]`; a spool's events reach the head in seq order (from the host
that writes it, or after its death from the one host that adopted it). Per spool the head keeps two marks:
- handed: the highest seq published to the outputs. Anything at or below it is a repeat (a replay after its host
  died) and is skipped.
- acknowledged: the highest seq up to which every event handed is done: delivered by each output that took it,
  or given up on there (`bus.receipt`). Outputs finish out of order (a broker acknowledges at once, a webhook
  retries), so it is the seq below the oldest event still held (or `handed` when none is).
The acknowledged marks go back to the host that sent the spool with its next drain (`acks_for`), and the host
forgets what they cover. So a head that dies with events in its outputs' queues has not acknowledged them: their
hosts' spools keep them, and the next run delivers them (docs/fleet.md, "Nothing lost"). Each output marks on
disk what it delivered (`bus.delivery_marks`, given here as `marks`), so such a replay goes only to the outputs
that had not delivered it.
"""

from __future__ import annotations

import dataclasses
import threading
from typing import Any

from bus import Event, EventBus
from bus.delivery_marks import DeliveryMarks
from bus.receipt import Receipt
from fleet.spool import writer_of


def event_key(spool_id: str, seq: int) -> str:
    """A spooled event's durable name: the same in every run of the head that delivers it."""
    return f"{spool_id}:{seq}"


class Delivery:
    """The head's marks. `receipt` is called on the coordinator's thread; receipts complete on the outputs' threads."""

    def __init__(self, marks: DeliveryMarks | None = None) -> None:
        self.marks = marks  # what each output delivered, kept across runs of the head (None: not kept)
        self.handed: dict[str, int] = {}  # spool id -> highest seq published
        self._held: dict[str, dict[int, None]] = {}  # spool id -> seqs published, not yet done (in seq order)
        self._via: dict[str, set[str]] = {}  # host -> the spools it sent
        self._lock = threading.Lock()
        self._settled = threading.Condition(self._lock)
        self.repeats = 0  # spooled events seen again and not delivered twice

    def fresh(self, host: str, item: dict[str, Any]) -> bool:
        """Whether `item` is to be delivered: an event that was never spooled, or a spooled one past its spool's
        handed mark. Then call `receipt` (or `delivered`) for it."""
        key = item.get("_spool")
        if key is None:
            return True
        spool_id, seq = key
        with self._lock:
            self._via.setdefault(host, set()).add(spool_id)
            if seq <= self.handed.get(spool_id, 0):
                self.repeats += 1
                return False
        return True

    def receipt(self, item: dict[str, Any]) -> Receipt | None:
        """The receipt to publish a fresh spooled `item` with (None for an event that was never spooled): it is
        handed now, and done when the receipt's last hold is released."""
        key = item.get("_spool")
        if key is None:
            return None
        spool_id, seq = key
        with self._lock:
            self.handed[spool_id] = max(seq, self.handed.get(spool_id, 0))
            self._held.setdefault(spool_id, {})[seq] = None
        return Receipt(event_key(spool_id, seq), lambda: self._done(spool_id, seq), self.marks)

    def publish(self, bus: EventBus, item: dict[str, Any], event: Event) -> None:
        """Publishes `event` (made of the fresh `item`) on `bus`; a spooled one with its receipt, which each output
        that takes it holds until it is done with it."""
        receipt = self.receipt(item)
        if receipt is None:
            bus.publish(event)
            return
        try:
            bus.publish(dataclasses.replace(event, receipt=receipt))
        finally:
            receipt.release()  # the publisher's own hold: every subscriber took what it wanted by now

    def delivered(self, item: dict[str, Any]) -> None:
        """A fresh spooled `item` that goes to no output (dropped on purpose, or not an event): handed and done."""
        receipt = self.receipt(item)
        if receipt is not None:
            receipt.release()

    def _done(self, spool_id: str, seq: int) -> None:
        with self._lock:
            self._held.get(spool_id, {}).pop(seq, None)
            self._settled.notify_all()

    def acknowledged(self, spool_id: str) -> int:
        """The highest seq of `spool_id` up to which every event handed is done (0: none)."""
        with self._lock:
            return self._acknowledged(spool_id)

    def _acknowledged(self, spool_id: str) -> int:
        held = self._held.get(spool_id)
        if held:
            return next(iter(held)) - 1
        return self.handed.get(spool_id, 0)

    def replayed(self, host: str, item: dict[str, Any]) -> bool:
        """Whether `item` comes from a spool `host` adopted (its writer died): the replay of a lost host. The
        adopting host marks it (`_replay`): after the head's death the new host on a box has the dead one's name."""
        key = item.get("_spool")
        return key is not None and (item.get("_replay") is True or writer_of(key[0]) != host)

    def acks_for(self, host: str) -> dict[str, int]:
        """spool id -> seq acknowledged, for the spools `host` sent (those with something acknowledged)."""
        with self._lock:
            marks = {spool_id: self._acknowledged(spool_id) for spool_id in self._via.get(host, ())}
        return {spool_id: seq for spool_id, seq in marks.items() if seq > 0}

    def outstanding(self) -> int:
        """Spooled events handed to the outputs that some output still holds."""
        with self._lock:
            return sum(len(held) for held in self._held.values())

    def settle(self, timeout: float) -> int:
        """Waits (at most `timeout` seconds) until no output holds a spooled event; returns how many still do."""
        with self._settled:
            self._settled.wait_for(lambda: not any(self._held.values()), timeout)
            return sum(len(held) for held in self._held.values())

    def lost(self, host: str) -> None:
        """The host is gone: its spools' marks stay (they still dedupe the adopter's replay)."""
        with self._lock:
            self._via.pop(host, None)
