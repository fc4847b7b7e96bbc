"""Watches set while the assistant runs (the API's "tell me when"): listed, added, changed and removed by any
thread, applied on the model worker through the assistant's command queue (`Assistant.set_runtime_watches`).

A runtime watch is a `WatchSpec` like one from the TOML (begin/end alerts, cooldown, on_change, snapshots; MQTT,
webhooks and the timeline get its alerts) plus who set it (`owner`: the API token's name), an optional expiry
(wall clock) and a one-shot mode (it ends itself at its first begin). They are kept in a private JSON file in the
data folder, so they survive a restart until removed or expired. A keeper thread ends expired and one-shot
watches; nothing here runs on the model worker except the bus callback, which only notes a one-shot's begin.

Refusals are ValueErrors the API turns into statuses: `NotFound` (404), `Conflict` (409), `TooMany` (429), any
other ValueError (422).
"""

from __future__ import annotations

import json
import logging
import math
import os
import secrets
import stat
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any, Protocol

from bus import Alert, Event
from bus.private_paths import make_private_dir
from timeline.config import default_timeline_path
from watches.spec import TABLE_KEYS, WatchSpec

logger = logging.getLogger(__name__)

STATE_FILE = "runtime-watches.json"
STATE_VERSION = 1
MIN_EVERY_S = 1.0  # a check costs a forward pass of the question: no faster than once a second of stream time
MAX_EVERY_S = 86_400.0
MAX_EXPIRY_S = 90 * 86_400.0
CHANGEABLE = frozenset(TABLE_KEYS) | {"expires_in_s", "one_shot"}


class NotFound(ValueError):
    """No such watch or stream."""


class Conflict(ValueError):
    """The name is taken (or names a configured watch, which only the TOML changes)."""


class TooMany(ValueError):
    """A limit on watches (per owner or in all) is reached."""


class Applies(Protocol):
    """What the registry needs of the assistant: a subset of the desk (bus.desk.Desk), one box's or a fleet's."""

    def desk_streams(self) -> Mapping[str, object]: ...  # the streams by name

    def check_question(self, question: str) -> str: ...

    def set_runtime_watches(
        self,
        specs: Iterable[WatchSpec],
        reasons: dict[str, str] | None = None,
        owners: dict[str, str] | None = None,
    ) -> None: ...


@dataclass(frozen=True)
class WatchLimits:
    """per_owner: runtime watches one token may hold; total: runtime watches in all."""

    per_owner: int = 64
    total: int = 256

    def __post_init__(self) -> None:
        for name in ("per_owner", "total"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise ValueError(f"watch limit {name} must be a whole number >= 1, got {value!r}")


@dataclass(frozen=True)
class RuntimeWatch:
    """spec: the watch. owner: the token's name that set it. created / expires_at: wall-clock seconds since the
    epoch (expires_at None: until removed). one_shot: ends itself at its first alert begin."""

    spec: WatchSpec
    owner: str = ""
    created: float = 0.0
    expires_at: float | None = None
    one_shot: bool = False

    def record(self) -> dict[str, Any]:
        spec = asdict(self.spec)
        spec["streams"] = list(self.spec.streams) if self.spec.streams is not None else None
        return {"spec": spec, "owner": self.owner, "created": self.created, "expires_at": self.expires_at,
                "one_shot": self.one_shot}  # fmt: skip

    @classmethod
    def from_record(cls, record: dict[str, Any]) -> RuntimeWatch:
        spec = dict(record["spec"])
        if spec.get("streams") is not None:
            spec["streams"] = tuple(spec["streams"])
        return cls(
            WatchSpec(**spec),
            owner=str(record.get("owner", "")),
            created=float(record.get("created", 0.0)),
            expires_at=None if record.get("expires_at") is None else float(record["expires_at"]),
            one_shot=bool(record.get("one_shot", False)),
        )


def state_path(data_folder: Path) -> Path:
    return data_folder / STATE_FILE


def runtime_watch_folder(config) -> Path | None:
    """Where the runtime watches are kept: beside an SQLite timeline, the default data folder beside a PostgreSQL
    one, nowhere with the timeline off (they last the run)."""
    timeline = getattr(config, "timeline", None)
    if timeline is None:
        return None
    path = getattr(timeline, "path", None)
    return path.parent if isinstance(path, Path) else default_timeline_path().parent


class RuntimeWatches:
    """The runtime watches of one assistant. `start()` loads the state file (dropping expired ones), applies
    them and starts the keeper; `close()` stops it. configured: the TOML's and --alert's watches (their names are
    taken; they are listed, never changed here). path: the state file (None: nothing kept across restarts).
    clock: wall-clock seconds (tests pass their own)."""

    def __init__(
        self,
        assistant: Applies,
        configured: Iterable[WatchSpec] = (),
        path: Path | None = None,
        limits: WatchLimits | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.assistant = assistant
        self.configured = {spec.name: spec for spec in configured}
        self.path = path
        self.limits = limits or WatchLimits()
        self.clock = clock
        self._watches: dict[str, RuntimeWatch] = {}
        self._lock = threading.RLock()
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._began: set[str] = set()  # one-shot watches whose alert began (noted on the worker)
        self._keeper: threading.Thread | None = None

    # -- life ---------------------------------------------------------------------------------------

    def start(self) -> None:
        with self._lock:
            self._watches = {w.spec.name: w for w in self._load() if not self._expired(w)}
            if self._watches:
                self._apply({})
                logger.info("runtime watches kept from the last run: %s", ", ".join(self._watches))
        self._keeper = threading.Thread(target=self._keep, name="runtime-watches", daemon=True)
        self._keeper.start()

    def close(self, timeout: float = 5.0) -> None:
        self._stop.set()
        self._wake.set()
        if self._keeper is not None:
            self._keeper.join(timeout)

    def __call__(self, event: Event) -> None:
        """Bus subscriber (the model worker's thread): notes a one-shot watch's first begin; the keeper ends it."""
        if isinstance(event, Alert) and event.began:
            watch = self._watches.get(event.alert)
            if watch is not None and watch.one_shot:
                self._began.add(event.alert)
                self._wake.set()

    # -- requests (any thread) ----------------------------------------------------------------------

    def list(self) -> list[RuntimeWatch]:
        """The runtime watches, oldest first."""
        with self._lock:
            return sorted(self._watches.values(), key=lambda w: w.created)

    def get(self, name: str) -> RuntimeWatch:
        with self._lock:
            if name not in self._watches:
                raise NotFound(self._unknown(name))
            return self._watches[name]

    def count(self, owner: str) -> int:
        with self._lock:
            return sum(1 for w in self._watches.values() if w.owner == owner)

    def add(
        self,
        settings: dict[str, Any],
        owner: str = "",
        expires_in_s: float | None = None,
        one_shot: bool = False,
    ) -> RuntimeWatch:
        """A new watch from `settings` (WatchSpec's fields; `name` optional: one is made). Refused, changing
        nothing, when a setting is bad (ValueError), a stream is unknown (NotFound), the name is taken
        (Conflict) or a limit is reached (TooMany)."""
        settings = dict(settings)
        with self._lock:
            if not settings.get("name"):
                settings["name"] = self._new_name()
            name = settings["name"]
            if name in self._watches or name in self.configured:
                where = "a configured watch (--alert, [alerts.NAME])" if name in self.configured else "a watch"
                raise Conflict(f"{where} named {name!r} exists already; choose another name or change that one")
            if self.count(owner) >= self.limits.per_owner:
                raise TooMany(
                    f"{owner or 'this token'} holds {self.limits.per_owner} watches already, the most one owner "
                    "may; remove one first"
                )
            if len(self._watches) >= self.limits.total:
                raise TooMany(f"{self.limits.total} watches are set already, the most the assistant keeps")
            watch = RuntimeWatch(
                self._spec(settings), owner, self.clock(), self._expiry(expires_in_s), _flag(one_shot, "one_shot")
            )
            self._watches[name] = watch
            self._commit({}, undo=lambda: self._watches.pop(name))
            return watch

    def change(self, name: str, changes: dict[str, Any]) -> RuntimeWatch:
        """The watch `name` with `changes` (any of WatchSpec's settings but its name, `expires_in_s`: from now,
        None: never; `one_shot`). Its alert state is kept only when its spec is unchanged."""
        unknown = sorted(set(changes) - CHANGEABLE)
        if unknown:
            raise ValueError(f"cannot change {', '.join(unknown)}; changeable: {', '.join(sorted(CHANGEABLE))}")
        with self._lock:
            if name in self.configured:
                raise Conflict(f"watch {name!r} is configured at start (--alert, [alerts.NAME]); change it there")
            before = self.get(name)
            spec_changes = {k: v for k, v in changes.items() if k in TABLE_KEYS}
            settings = {**asdict(before.spec), **spec_changes}
            watch = replace(before, spec=self._spec(settings))
            if "expires_in_s" in changes:
                watch = replace(watch, expires_at=self._expiry(changes["expires_in_s"]))
            if "one_shot" in changes:
                watch = replace(watch, one_shot=_flag(changes["one_shot"], "one_shot"))
            self._watches[name] = watch

            def undo() -> None:
                self._watches[name] = before

            self._commit({}, undo=undo)
            return watch

    def remove(self, name: str, reason: str = "removed") -> RuntimeWatch:
        with self._lock:
            if name in self.configured:
                raise Conflict(f"watch {name!r} is configured at start (--alert, [alerts.NAME]); remove it there")
            watch = self.get(name)
            del self._watches[name]

            def undo() -> None:
                self._watches[name] = watch

            self._commit({name: reason}, undo=undo)
            return watch

    # -- inside -------------------------------------------------------------------------------------

    def _spec(self, settings: dict[str, Any], streams_running: bool = True) -> WatchSpec:
        """The checked spec of `settings`; streams_running: its streams must run now (not for a kept watch, which
        waits for its stream after a restart)."""
        unknown = sorted(set(settings) - set(TABLE_KEYS) - {"name"})
        if unknown:
            raise ValueError(f"unknown watch setting(s) {', '.join(unknown)}; allowed: name, {', '.join(TABLE_KEYS)}")
        settings = dict(settings)
        settings["question"] = self.assistant.check_question(settings.get("question", ""))
        streams = settings.get("streams")
        if streams is not None:
            if not isinstance(streams, (list, tuple)):
                raise ValueError("streams must be a list of stream names (or null: every stream)")
            settings["streams"] = tuple(streams)
        spec = WatchSpec(**settings)
        if not MIN_EVERY_S <= spec.every <= MAX_EVERY_S:
            raise ValueError(
                f"watch {spec.name!r}: every must be {MIN_EVERY_S:g} to {MAX_EVERY_S:g} seconds of stream time, "
                f"got {spec.every!r}"
            )
        streams = self.assistant.desk_streams()
        missing = [s for s in spec.streams or () if s not in streams]
        if missing and streams_running:
            known = ", ".join(streams)
            raise NotFound(f"watch {spec.name!r} names unknown stream(s) {', '.join(missing)}; streams: {known}")
        return spec

    def _expiry(self, expires_in_s: object) -> float | None:
        if expires_in_s is None:
            return None
        if (
            not isinstance(expires_in_s, (int, float))
            or isinstance(expires_in_s, bool)
            or not math.isfinite(expires_in_s)
            or not 0 < expires_in_s <= MAX_EXPIRY_S
        ):
            raise ValueError(
                f"expires_in_s must be a number of seconds > 0 and <= {MAX_EXPIRY_S:g} (or null), got {expires_in_s!r}"
            )
        return round(self.clock() + float(expires_in_s), 3)

    def _new_name(self) -> str:
        while True:
            name = f"watch-{secrets.token_hex(3)}"
            if name not in self._watches and name not in self.configured:
                return name

    def _unknown(self, name: str) -> str:
        return f"no runtime watch named {name!r}; watches: {', '.join(self._watches) or 'none'}"

    def _expired(self, watch: RuntimeWatch) -> bool:
        return watch.expires_at is not None and watch.expires_at <= self.clock()

    def _commit(self, reasons: dict[str, str], undo: Callable[[], None]) -> None:
        """Applies the registry to the assistant (undone when the assistant refuses: busy) and saves it."""
        try:
            self._apply(reasons)
        except ValueError:
            undo()
            raise
        self._save()

    def _apply(self, reasons: dict[str, str]) -> None:
        owners = {name: w.owner for name, w in self._watches.items()}
        self.assistant.set_runtime_watches([w.spec for w in self._watches.values()], reasons, owners)

    def _keep(self) -> None:
        """Ends expired watches and one-shot watches that began; wakes at the next expiry, a begin, or each 1 s."""
        while not self._stop.is_set():
            self._wake.wait(1.0)
            self._wake.clear()
            if self._stop.is_set():
                return
            with self._lock:
                began, self._began = self._began, set()
                gone = {n: "one-shot" for n in began if n in self._watches and self._watches[n].one_shot}
                gone |= {n: "expired" for n, w in self._watches.items() if n not in gone and self._expired(w)}
                if not gone:
                    continue
                before = dict(self._watches)
                for name in gone:
                    del self._watches[name]
                try:
                    self._commit(gone, undo=lambda before=before: self._watches.update(before))
                except ValueError as err:  # the assistant is busy: the next turn tries again
                    logger.warning("runtime watches %s not ended yet: %s", ", ".join(gone), err)
                    self._began |= began
                    continue
            logger.info("runtime watches ended: %s", ", ".join(f"{n} ({r})" for n, r in gone.items()))

    def _load(self) -> list[RuntimeWatch]:
        """The kept watches, the state file treated as hostile input: read bounded, never through a link nor from
        another user's file; each entry checked as an added one is (its settings, every, the limits per owner and
        in all), a bad one skipped with a warning. A file that cannot be read is kept aside (`.unreadable`), not
        overwritten by the next save."""
        if self.path is None or not (self.path.exists() or self.path.is_symlink()):
            return []
        try:
            data = json.loads(_read_state(self.path))
            records = data["watches"] if isinstance(data, dict) else None
            if not isinstance(records, list):
                raise ValueError("no list of watches in it")
        except (OSError, ValueError, KeyError, TypeError, RecursionError) as err:
            aside = self.path.with_name(self.path.name + ".unreadable")
            try:
                os.replace(self.path, aside)
            except OSError:
                aside = None
            logger.warning(
                "runtime watches file %s cannot be read (%s): starting without them%s", self.path, str(err)[:200],
                f"; it is kept as {aside}" if aside else "",
            )  # fmt: skip
            return []
        watches: list[RuntimeWatch] = []
        for record in records[: self.limits.total + len(self.configured)]:
            try:
                watch = RuntimeWatch.from_record(record)
                spec = asdict(watch.spec)
                if spec["streams"] is not None:
                    spec["streams"] = list(spec["streams"])
                watch = replace(watch, spec=self._spec(spec, streams_running=False))  # an added watch's checks
                if watch.spec.name in self.configured or any(w.spec.name == watch.spec.name for w in watches):
                    continue
                if sum(1 for w in watches if w.owner == watch.owner) >= self.limits.per_owner:
                    raise ValueError(f"{watch.owner or 'its owner'} holds {self.limits.per_owner} watches already")
            except (KeyError, TypeError, ValueError, AttributeError) as err:
                logger.warning("runtime watches file %s: an entry is skipped (%s)", self.path, str(err)[:200])
                continue
            watches.append(watch)
            if len(watches) >= self.limits.total:
                break
        return watches

    def _save(self) -> None:
        """Writes the registry to the state file (0600, in a 0700 folder; replaced whole, never half written,
        never through a link planted as its `.part`)."""
        if self.path is None:
            return
        data = {"version": STATE_VERSION, "watches": [w.record() for w in self._watches.values()]}
        try:
            make_private_dir(self.path.parent)
            part = self.path.with_name(self.path.name + ".part")
            part.unlink(missing_ok=True)  # whatever was left there (a link too): the file is made anew
            fd = os.open(part, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0), 0o600)
            with os.fdopen(fd, "w", encoding="utf-8") as out:
                json.dump(data, out, indent=1)
            os.replace(part, self.path)
        except OSError as err:
            logger.warning("runtime watches not saved to %s (%s): they will not survive a restart", self.path, err)


STATE_MAX_BYTES = 4 << 20  # 256 watches of long questions are well under 1 MiB


def _read_state(path: Path) -> str:
    """The state file's text: a regular file of this user, not a link, at most STATE_MAX_BYTES; OSError, or
    ValueError saying why."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOFOLLOW", 0))
    with os.fdopen(fd, "rb") as file:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise ValueError("not a regular file")
        if info.st_uid != os.geteuid():
            raise ValueError(f"it belongs to another user (uid {info.st_uid})")
        data = file.read(STATE_MAX_BYTES + 1)
    if len(data) > STATE_MAX_BYTES:
        raise ValueError(f"larger than {STATE_MAX_BYTES >> 20} MiB")
    return data.decode("utf-8")


def _flag(value: object, name: str) -> bool:
    if not isinstance(value, bool):
        raise ValueError(f"{name} must be true or false, got {value!r}")
    return value


__all__ = [
    "Conflict",
    "NotFound",
    "RuntimeWatch",
    "RuntimeWatches",
    "TooMany",
    "WatchLimits",
    "state_path",
]
