"""A host's spools: its own (what it makes now) and the orphans it adopted (what a dead host on this box made and
the head had not acknowledged). The data folder (`$EDGE_ASSISTANT_DATA`, else ~/.cache/edge-stream-assistant) is
the box's: a spool waits there until a host runs on that box again."""

from __future__ import annotations

import logging
import threading
import time
from pathlib import Path
from typing import Any

from fleet.spool import SUFFIX, Spool
from timeline.config import default_timeline_path

logger = logging.getLogger(__name__)

SCAN_EVERY_S = 2.0  # how often the folder is looked at for orphans


def spool_folder() -> Path:
    """The box's spool folder: `fleet-spool` in the data folder."""
    return default_timeline_path().parent / "fleet-spool"


def head_folder() -> Path:
    """The head's folder on its box: `fleet-head` in the data folder (what each output delivered:
    bus/delivery_marks.py)."""
    return default_timeline_path().parent / "fleet-head"


class HostSpools:
    """The spools one host holds. `append` writes to its own; `unsent` offers every held spool's unsent events
    (the orphans' first); `ack` applies the head's acknowledgements (spool id -> seq) and lets a fully delivered
    orphan go (its file deleted)."""

    def __init__(self, folder: Path, host: str) -> None:
        self.folder = folder
        self.own = Spool.create(folder, host)
        self.adopted: dict[str, Spool] = {}
        self._scanned_at = float("-inf")
        self._lock = threading.Lock()  # a drain in flight and the last one at a stop may overlap
        self.scan()

    def scan(self) -> None:
        """Adopts the orphans in the folder (at most every SCAN_EVERY_S seconds)."""
        now = time.monotonic()
        if now - self._scanned_at < SCAN_EVERY_S:
            return
        with self._lock:
            self._scanned_at = now
            self._adopt_orphans()

    def _adopt_orphans(self) -> None:
        held = {self.own.id, *self.adopted}
        for path in sorted(self.folder.glob(f"*{SUFFIX}")):
            if path.name.removesuffix(SUFFIX) in held:
                continue
            spool = Spool.adopt(path)
            if spool is None:
                continue
            if not spool.pending:
                spool.remove()
                continue
            logger.warning("adopted the spool %s: %d events to deliver", spool.id, len(spool.pending))
            self.adopted[spool.id] = spool

    def append(self, wire: dict[str, Any]) -> int:
        return self.own.append(wire)

    def has_unsent(self) -> bool:
        with self._lock:
            return any(s.last_seq > s.sent for s in (*self.adopted.values(), self.own))

    def unsent(self) -> list[dict[str, Any]]:
        """Every held spool's events not yet offered (made durable first: fsync)."""
        items: list[dict[str, Any]] = []
        with self._lock:
            for spool in (*self.adopted.values(), self.own):
                spool.sync()
                items += spool.unsent()
        return items

    def ack(self, acked: dict[str, int]) -> None:
        with self._lock:
            self._ack(acked)

    def _ack(self, acked: dict[str, int]) -> None:
        for spool_id, seq in acked.items():
            spool = self.own if spool_id == self.own.id else self.adopted.get(spool_id)
            if spool is None:
                continue
            spool.ack(seq)
            if spool is not self.own and not spool.pending:
                self.adopted.pop(spool_id).remove()

    def close(self, delivered: bool) -> None:
        """Lets every spool go; with `delivered` (the head acknowledged the last drain), those with nothing
        pending are deleted, the rest stay for a host to adopt."""
        with self._lock:
            for spool in (*self.adopted.values(), self.own):
                spool.sync()
                if delivered and not spool.pending:
                    spool.remove()
                else:
                    spool.close()
            self.adopted.clear()
