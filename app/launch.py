"""What a front door starts: a `Launcher` makes the running assistant, one box (`ONE_BOX`, here) or the fleet
(`fleet.launch.FLEET`, which the program root passes in), and hands the door a `Launched`: the desk (bus.desk) and
what comes with it. Every door (app/web.py, app/serve_api.py, app/terminal.py) is written once against it.

A door first says what it attaches (`Feeds`: the page's state, the terminal's printer, the page's upload folder),
then calls `launcher.start(config, feeds)` (StartupError, exit 2, with the reason), sets up its own part, calls
`launched.begin()` (the work starts: the streams are watched; SourceError for a file or camera that cannot be
opened) and, at the end, `launched.close()`."""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path

from app.config import AppConfig
from app.front_door import TimelineHistory, capture_options, timeline_history
from app.startup import build_assistant, start_session
from bus import Subscriber
from bus.desk import Desk
from capture.options import CaptureOptions
from monitor.memory_monitor import MemoryMonitor
from watches.runtime import RuntimeWatches


@dataclass(frozen=True)
class Feeds:
    """What a door attaches before the work begins. displays: called on the publishing thread (the page's state);
    writers: each behind its own queue and thread (the terminal's printer); upload_dirs: folders whose files may
    be watched besides those the source policy allows (the page's uploads)."""

    displays: Sequence[Subscriber] = ()
    writers: Sequence[Subscriber] = ()
    upload_dirs: tuple[Path, ...] = ()


@dataclass(frozen=True)
class RunAbout:
    """What the page's settings line says of the run besides the config: the model family, where it runs, and how
    memory is read (`memory`: the monitor whose readings the page plots; None: each host's own, not plotted)."""

    family: str
    device: str
    dtype: str
    memory_backend: str
    memory_label: str
    memory: MemoryMonitor | None = None


@dataclass
class Launched:
    """A running assistant as a door gets it. watches: the watches set while running (the API, the page's form,
    the terminal's commands); streams: a line said once it runs (None: nothing to say); frame_size: the model's
    frame size, which streams added at run time are resized to (None: each host sizes its own); upload_dirs: the
    door's (`Feeds`)."""

    config: AppConfig
    desk: Desk
    done: threading.Event  # set when the run has ended (--max-rounds, every file played)
    watches: RuntimeWatches | None
    about: RunAbout
    begin: Callable[[], None]
    closers: list[Callable[[], None]] = field(default_factory=list)  # in order
    streams: str | None = None
    frame_size: tuple[int, int] | None = None
    upload_dirs: tuple[Path, ...] = ()

    @cached_property
    def options(self) -> CaptureOptions:
        """How a stream added at run time is captured (--fps, --clip-seconds, ...; the source policy)."""
        return capture_options(self.config, self.frame_size, upload_dirs=self.upload_dirs)

    @cached_property
    def history(self) -> TimelineHistory | None:
        """The timeline to search (None: off)."""
        return timeline_history(self.config)

    def close(self) -> None:
        for close in self.closers:
            close()


@dataclass(frozen=True)
class Launcher:
    """A start function and what a door says while it runs (the API's port answers 503 with it)."""

    start: Callable[[AppConfig, Feeds], Launched]
    starting: str


def start_one_box(config: AppConfig, feeds: Feeds) -> Launched:
    """Loads the model and builds this box's assistant (not started until `begin`)."""
    loaded, streams, factory = start_session(config)
    monitor = MemoryMonitor()
    running = build_assistant(config, streams, monitor, list(feeds.displays), factory, writers=feeds.writers)
    assistant = running.assistant

    def begin() -> None:
        assistant.start()
        running.watch_configured_sources(config, loaded)

    about = RunAbout(
        family=loaded.family,
        device=str(loaded.device),
        dtype=str(loaded.dtype).removeprefix("torch."),
        memory_backend=monitor.backend,
        memory_label=monitor.label,
        memory=monitor,
    )
    return Launched(
        config, assistant, assistant.done, running.watches, about, begin, [running.close],
        frame_size=loaded.adapter.frame_size(), upload_dirs=feeds.upload_dirs,
    )  # fmt: skip


ONE_BOX = Launcher(start_one_box, "loading the model; a first start on this machine also builds its CPU kernels")
