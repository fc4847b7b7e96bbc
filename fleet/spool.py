"""One spool file: the durable events (alerts, answers) a fleet host made, appended before the head sees them, so
that a host's death loses none (docs/fleet.md, "Nothing lost").

The file is JSON lines, append-only: `{"seq": N, "event": WIRE}` for each event (N counts up from 1) and
`{"ack": N}` once the head has delivered every event up to N. A line is one `write` (it survives the process
being killed: the kernel holds it); `sync` makes what was written survive the machine too (fsync, once per
drain: in batches). The live host that writes or replays a spool holds an exclusive `flock` on it, so a
spool whose lock can be taken is an orphan: its writer died, and one other host adopts it and offers its tail.
"""

from __future__ import annotations

import base64
import fcntl
import json
import logging
import os
import threading
from pathlib import Path
from typing import Any

from bus.private_paths import make_private_dir

logger = logging.getLogger(__name__)

SUFFIX = ".spool"
ROTATE_BYTES = 4 << 20  # a fully acknowledged file larger than this starts again empty (its seq goes on)


def writer_of(spool_id: str) -> str:
    """The name of the host that wrote a spool (its id is `NAME-PID-RANDOM`)."""
    return spool_id.rsplit("-", 2)[0]


def to_line(wire: dict[str, Any]) -> dict[str, Any]:
    """A wire dict as JSON values: an alert's JPEG snapshot (bytes) as base64; a clip preview is never spooled."""
    line = {k: v for k, v in wire.items() if k not in ("_snapshot", "_preview")}
    if isinstance(wire.get("_snapshot"), bytes):
        line["_snapshot_b64"] = base64.b64encode(wire["_snapshot"]).decode("ascii")
    return line


def from_line(line: dict[str, Any]) -> dict[str, Any]:
    wire = {k: v for k, v in line.items() if k != "_snapshot_b64"}
    if "_snapshot_b64" in line:
        wire["_snapshot"] = base64.b64decode(line["_snapshot_b64"])
    return wire


class Spool:
    """An open, locked spool file. `id`: its name (unique: host, pid, a random part), the dedupe key of its
    events with their seq. `pending`: seq -> wire of the events the head has not acknowledged, oldest first.
    Use `create` (a new one, written by this host) or `adopt` (an orphan's, replayed)."""

    def __init__(self, path: Path, fd: int, pending: dict[int, dict[str, Any]], last_seq: int, acked: int) -> None:
        self.path, self.fd = path, fd
        self.id = path.name.removesuffix(SUFFIX)
        self.pending, self.last_seq, self.acked = pending, last_seq, acked
        self.sent = acked  # the highest seq handed to the head in this process
        self.replay = False  # an orphan's (adopted): its events are marked `_replay` for the head
        self._dirty = False
        self._lock = threading.Lock()  # appends come from the model worker's thread, drains from the actor's

    @classmethod
    def create(cls, folder: Path, name: str) -> Spool:
        make_private_dir(folder)  # 0700: what the cameras saw and what people asked
        path = folder / f"{name}-{os.getpid()}-{os.urandom(4).hex()}{SUFFIX}"
        fd = os.open(path, os.O_RDWR | os.O_APPEND | os.O_CREAT | os.O_EXCL, 0o600)
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        return cls(path, fd, {}, 0, 0)

    @classmethod
    def adopt(cls, path: Path) -> Spool | None:
        """The orphan at `path`, locked by this process with its unacknowledged events; None when a live host
        holds it (or it is gone). A line torn by the writer's death is cut off."""
        try:
            fd = os.open(path, os.O_RDWR | os.O_APPEND)
        except FileNotFoundError:
            return None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            return None
        if not path.exists():  # removed by the host that held it just before
            os.close(fd)
            return None
        data = path.read_bytes()
        whole = data[: data.rfind(b"\n") + 1]
        if len(whole) < len(data):
            os.ftruncate(fd, len(whole))
            logger.warning("spool %s: a torn last line (%d bytes) was cut off", path.name, len(data) - len(whole))
        pending: dict[int, dict[str, Any]] = {}
        last_seq = acked = 0
        for raw in whole.splitlines():
            line = json.loads(raw)
            if "ack" in line:
                acked = max(acked, line["ack"])
            else:
                last_seq = line["seq"]
                pending[line["seq"]] = from_line(line["event"])
        pending = {seq: wire for seq, wire in pending.items() if seq > acked}
        spool = cls(path, fd, pending, max(last_seq, acked), acked)
        spool.replay = True
        return spool

    def append(self, wire: dict[str, Any]) -> int:
        """Writes the event (one line, one write) and returns its seq."""
        with self._lock:
            self.last_seq += 1
            self._write({"seq": self.last_seq, "event": to_line(wire)})
            self.pending[self.last_seq] = wire
            return self.last_seq

    def sync(self) -> None:
        """What was written survives the machine too (one fsync for everything since the last)."""
        with self._lock:
            if self._dirty:
                os.fsync(self.fd)
                self._dirty = False

    def unsent(self) -> list[dict[str, Any]]:
        """The pending events not yet handed to the head, each with `_spool: [id, seq]` (and `_replay: True` from an
        adopted orphan); marked sent."""
        mark = {"_replay": True} if self.replay else {}
        with self._lock:
            fresh = [{**w, "_spool": [self.id, seq], **mark} for seq, w in self.pending.items() if seq > self.sent]
            self.sent = max(self.sent, self.last_seq)
            return fresh

    def ack(self, seq: int) -> None:
        """The head delivered every event up to `seq`: they are kept no longer (an `ack` line)."""
        with self._lock:
            if seq <= self.acked:
                return
            self.acked = seq
            self.pending = {s: w for s, w in self.pending.items() if s > seq}
            if not self.pending and os.fstat(self.fd).st_size > ROTATE_BYTES:
                os.ftruncate(self.fd, 0)
            self._write({"ack": seq})

    def remove(self) -> None:
        """Deletes the file (everything in it was delivered) and lets it go."""
        with self._lock:
            self.path.unlink(missing_ok=True)
            os.close(self.fd)

    def close(self) -> None:
        with self._lock:
            os.close(self.fd)

    def _write(self, line: dict[str, Any]) -> None:
        os.write(self.fd, (json.dumps(line, separators=(",", ":")) + "\n").encode())
        self._dirty = True
