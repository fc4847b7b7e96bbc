"""How a stream is made on the one loaded model, at start and when one is added while the assistant runs: its
session (device cache + host store), its standing question and its watches; and whether one more fits
(admission, app/admission.py, against the memory free now)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace

import psutil
import torch

from app.admission import (
    AdmissionError,
    CaptureShape,
    KvShape,
    ModelShape,
    StreamCost,
    check_fits,
    stream_cost,
    stream_overhead,
)
from app.stream import Stream, open_capture
from app.streams import check_name
from cache.config import CacheConfig
from capture import CaptureConfig, CaptureThread
from model.loading import LoadedModel
from model.session import SessionConfig, StreamingSession
from watches.scheduler import StandingQuestion
from watches.spec import WatchSpec
from watches.watch import Watch


@dataclass(frozen=True)
class FreeMemory:
    """Bytes free now. shared: the device is the CPU or a Jetson (device KV and host store draw on the same RAM)."""

    device: int
    host: int
    shared: bool


def free_memory(device: torch.device) -> FreeMemory:
    """What is free now: the CUDA device's free memory and the host's available RAM (one number on the CPU)."""
    host = psutil.virtual_memory().available
    if device.type == "cuda":
        return FreeMemory(torch.cuda.mem_get_info(device)[0], host, shared=False)
    return FreeMemory(host, host, shared=True)


@dataclass(frozen=True)
class NewStream:
    """A stream to add: built and admitted, its capture opened but not started. down: why its network source
    could not be opened (it starts reconnecting), None when it opened. admission: the memory arithmetic."""

    stream: Stream
    capture: CaptureThread
    down: str | None
    admission: str


@dataclass
class StreamFactory:
    """Builds streams that share `loaded`. cache: every stream's cache config (an automatic host-store bound
    already shared out). question / every_s: the standing question of a stream that has none of its own.
    watches: the run's yes/no watches; a stream gets those that name it or watch every stream. capture: how each
    stream is captured, for the threads, decoder and frame buffers admission counts (None: only the KV counted).
    max_streams: the most streams at once (--max-streams)."""

    loaded: LoadedModel
    cache: CacheConfig
    session: SessionConfig
    question: str
    every_s: float
    watches: list[WatchSpec] = field(default_factory=list)
    capture: CaptureShape | None = None
    max_streams: int = 8

    def cost(self) -> StreamCost:
        shape = KvShape.of_model(self.loaded.model, self.loaded.adapter.position_dims)
        cost = stream_cost(shape, self.cache, self.session.chunk_size)
        if self.capture is None or cost.device_tokens is None:
            return cost
        overhead = stream_overhead(self.capture, ModelShape.of_model(self.loaded.model), cost.device_tokens)
        return replace(cost, overhead=overhead)

    def admit(self, streams: int, running: Sequence[Stream] = ()) -> str:
        """The memory arithmetic of `streams` streams against the memory free now (a line); AdmissionError (a
        ValueError) with that arithmetic and what to lower when they do not fit. running: those of the streams
        already running, whose buffers and stores already hold part of their cost (that part is not free)."""
        free = free_memory(self.loaded.device)
        return check_fits(
            self.cost(), max(streams, 1), free.device, free.host, free.shared, held_now(running), len(running)
        )

    def build(self, name: str, schedule: StandingQuestion | None = None) -> Stream:
        """A stream named `name` with a fresh session (empty cache) on the loaded model; not watching yet.
        schedule: its own standing question (None: the run's question and interval)."""
        schedule = schedule or StandingQuestion(self.question, self.every_s)
        stream = Stream(name, StreamingSession(self.loaded, self.cache, self.session), schedule)
        stream.watches = [Watch(spec, name) for spec in self.watches if spec.watches(name)]
        return stream

    def new_stream(
        self,
        name: str,
        running: Mapping[str, Stream],
        capture_config: CaptureConfig,
        allow_down: bool,
        schedule: StandingQuestion | None = None,
    ) -> NewStream:
        """One more stream next to the `running` ones, checked in the order of what is cheapest to refuse: a name
        that breaks the rules of --stream or is taken (ValueError), one stream more than memory holds
        (AdmissionError: `len(running) + 1` streams, the same arithmetic as at start, against the memory free
        now plus what the running streams hold already), a file or camera that cannot be opened (SourceError;
        with `allow_down` a network source that is down starts reconnecting). Nothing is kept when refused."""
        check_name(name)
        if name in running:
            raise ValueError(f"a stream named {name!r} exists already: every stream needs its own name")
        if len(running) >= self.max_streams:
            raise AdmissionError(
                f"{len(running)} streams run already, the most --max-streams {self.max_streams} allows; remove one "
                "first (terminal: -NAME; page: Remove stream) or start with a higher --max-streams"
            )
        try:
            admission = self.admit(len(running) + 1, list(running.values()))
        except AdmissionError as err:
            raise AdmissionError(f"one more stream does not fit in memory: {err}") from err
        stream = self.build(name, schedule)
        capture, down = open_capture(capture_config, allow_down)
        return NewStream(stream, capture, down, admission)


def held_now(streams: Sequence[Stream]) -> tuple[int, int]:
    """(device, host) bytes the streams' caches and host stores hold now (read from another thread: an estimate
    as of a moment ago, which is all admission needs)."""
    device = host = 0
    for stream in streams:
        cache = stream.session.cache
        device += cache.kv_bytes()
        host += cache.store.bytes if cache.store is not None else 0
    return device, host


__all__ = ["AdmissionError", "FreeMemory", "NewStream", "StreamFactory", "free_memory"]
