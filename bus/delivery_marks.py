"""Which output delivered which spooled event, kept on disk: so a fleet's new head does not send again what an
output already delivered before the old head died (docs/fleet.md, "Nothing lost").

The head acknowledges a spooled event only once every output that took it is done (`bus.receipt`), so after the
head's death its hosts hand the next head everything some output had not finished. Without these marks the outputs
that had finished (a broker that acknowledged at once, beside a webhook that was retrying) would get those events a
second time. An output marks an event here once it has delivered it (the broker's PUBACK, a 2xx answer) and skips a
replayed event it finds marked.

What is left is the instant between an output's delivery and its mark reaching the disk (one `fsync`): a head
killed then sends that event again, with the same key (`event_key`) for the receiver to drop. MQTT's QoS 1 is
itself at least once; a new process cannot continue the dead one's MQTT session, so no client does better.

One line per mark in `delivered.log` (0600, in a 0700 folder): a hash of the output's name (a webhook's name holds
its whole URL, which may hold a token: never written) and the event's key. Only the newest `keep` keys of each
output are kept: the events a head may replay are those its outputs had not finished, far fewer.
"""

from __future__ import annotations

import hashlib
import logging
import os
import threading
from collections import OrderedDict
from pathlib import Path

from bus.private_paths import make_private_dir

logger = logging.getLogger(__name__)

FILE_NAME = "delivered.log"
KEEP = 4096  # keys kept per output
MAX_OUTPUTS = 64  # outputs whose marks are read back (a head has a few)
MAX_KEY = 256  # characters of a key read back (event keys are short)
MAX_BYTES = 16 << 20  # the end of the file read back at start (KEEP keys of a few outputs fit in far less)


def output_id(output: str) -> str:
    """What the file holds for an output's name: never the name itself (a URL may hold a token)."""
    return hashlib.sha256(output.encode("utf-8")).hexdigest()[:16]


class DeliveryMarks:
    """The marks in `folder` (created 0700). `has` and `add` may be called from any thread."""

    def __init__(self, folder: Path, keep: int = KEEP) -> None:
        if keep < 1:
            raise ValueError(f"keep must be at least 1, got {keep}")
        self.path = Path(folder) / FILE_NAME
        self.keep = keep
        self._marks: dict[str, OrderedDict[str, None]] = {}
        self._lines = 0
        self._lock = threading.Lock()
        make_private_dir(self.path.parent)
        torn = self._load()
        if torn or self._lines > 2 * keep * max(1, len(self._marks)):
            self._rewrite()  # the next line must not continue a torn one
        self._file = open(self.path, "a", encoding="utf-8")  # noqa: SIM115 (open while the head runs)
        os.chmod(self.path, 0o600)

    def has(self, output: str, key: str) -> bool:
        with self._lock:
            return key in self._marks.get(output_id(output), ())

    def add(self, output: str, key: str) -> None:
        """Marks `key` delivered by `output`, on disk before it returns. A write that fails (a full disk, or a late
        acknowledgement after `close`) is logged: the event may then be sent again after a restart, as without
        marks."""
        ident = output_id(output)
        with self._lock:
            self._remember(ident, key)
            try:
                self._file.write(f"{ident} {key}\n")
                self._file.flush()
                os.fsync(self._file.fileno())
                self._lines += 1
                if self._lines > 2 * self.keep * len(self._marks):
                    self._rewrite()
            except (OSError, ValueError):  # ValueError: the file was closed
                logger.warning("%s: a delivery mark was not written", self.path, exc_info=True)

    def close(self) -> None:
        with self._lock:
            self._file.close()

    def _remember(self, ident: str, key: str) -> None:
        keys = self._marks.setdefault(ident, OrderedDict())
        keys[key] = None
        keys.move_to_end(key)
        while len(keys) > self.keep:
            keys.popitem(last=False)

    def _load(self) -> bool:
        """Reads the marks, bounded whatever the file holds (a hostile one of 2 million ids once took 1.28 GB at
        start): its last MAX_BYTES only, at most MAX_OUTPUTS outputs and keys of MAX_KEY characters; True when
        the last line was torn."""
        try:
            with open(self.path, "rb") as file:
                size = file.seek(0, os.SEEK_END)
                file.seek(max(size - MAX_BYTES, 0))
                data = file.read(MAX_BYTES)
        except FileNotFoundError:
            return False
        text = data.decode("utf-8", errors="replace")
        lines = text.split("\n")
        if size > MAX_BYTES:
            lines = lines[1:]  # the first is cut by where the read began
        marks = [line.partition(" ") for line in lines[:-1]]  # a torn last line (killed mid-write) is left out
        marks = [(ident, key) for ident, _, key in marks if len(ident) == 16 and key and len(key) <= MAX_KEY]
        newest: dict[str, None] = {}  # the outputs of the newest marks, MAX_OUTPUTS at most
        for ident, _ in reversed(marks):
            if len(newest) >= MAX_OUTPUTS:
                break
            newest.setdefault(ident)
        for ident, key in marks:
            if ident in newest:
                self._remember(ident, key)
                self._lines += 1
        return not text.endswith("\n") and text != ""

    def _rewrite(self) -> None:
        """Keeps only what is remembered: written aside, then put in place (called with `_lock` held, or at start)."""
        aside = self.path.with_suffix(".new")
        with open(aside, "w", encoding="utf-8") as out:
            os.chmod(aside, 0o600)
            for ident, keys in self._marks.items():
                out.writelines(f"{ident} {key}\n" for key in keys)
            out.flush()
            os.fsync(out.fileno())
        os.replace(aside, self.path)
        if hasattr(self, "_file"):
            self._file.close()
            self._file = open(self.path, "a", encoding="utf-8")  # noqa: SIM115
        self._lines = sum(len(keys) for keys in self._marks.values())
