"""What the head delivered of the hosts' spools (app/fleet/spool.py): each spooled event once, acknowledged back.

A spooled event carries `_spool: [spool id, seq]`; a spool's events reach the head in seq order (from the host
that writes it, or after its death from the one host that adopted it), so one mark per spool, the highest seq
delivered, says what was delivered and what is a repeat. The marks go back to the host that sent them with its
next drain (`acks_for`), and the host forgets what they cover."""

from __future__ import annotations

from typing import Any

from app.fleet.spool import writer_of


class Delivery:
    """The head's marks: spool id -> highest seq delivered; host -> the spools it sent."""

    def __init__(self) -> None:
        self.marks: dict[str, int] = {}
        self._via: dict[str, set[str]] = {}
        self.repeats = 0  # spooled events seen again and not delivered twice

    def fresh(self, host: str, item: dict[str, Any]) -> bool:
        """Whether `item` is to be delivered: an event that was never spooled, or a spooled one past its spool's
        mark. Call `delivered` once it was."""
        key = item.get("_spool")
        if key is None:
            return True
        spool_id, seq = key
        self._via.setdefault(host, set()).add(spool_id)
        if seq <= self.marks.get(spool_id, 0):
            self.repeats += 1
            return False
        return True

    def delivered(self, item: dict[str, Any]) -> None:
        key = item.get("_spool")
        if key is not None:
            spool_id, seq = key
            self.marks[spool_id] = max(seq, self.marks.get(spool_id, 0))

    def replayed(self, host: str, item: dict[str, Any]) -> bool:
        """Whether `item` comes from a spool `host` adopted (its writer died): the replay of a lost host."""
        key = item.get("_spool")
        return key is not None and writer_of(key[0]) != host

    def acks_for(self, host: str) -> dict[str, int]:
        """spool id -> seq delivered, for the spools `host` sent."""
        return {spool_id: self.marks[spool_id] for spool_id in self._via.get(host, ()) if spool_id in self.marks}

    def lost(self, host: str) -> None:
        """The host is gone: its spools' marks stay (they still dedupe the adopter's replay)."""
        self._via.pop(host, None)
