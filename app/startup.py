"""What both front ends (terminal and web page) do first: check the source, load the model, build the
session. Every failure is a `StartupError` whose message the CLI prints before exiting with code 2."""

from __future__ import annotations

import sys

from app.config import AppConfig
from cache.attention import register_attention
from capture import SourceError, open_source
from model.loading import LoadedModel, ModelLoadError, load_model
from model.session import StreamingSession
from ui.memory_monitor import MemoryMonitor

EXIT_BAD_INPUT = 2


class StartupError(Exception):
    """The run cannot start: a bad source, model or setting. The message says which and what to try."""


def fail(message: str) -> int:
    print(f"error: {message}", file=sys.stderr)
    return EXIT_BAD_INPUT


def probe_source(config: AppConfig) -> None:
    """Opens and closes the source once, so a bad one fails before the model loads (SourceError)."""
    open_source(config.capture).close()


def start_session(config: AppConfig) -> tuple[LoadedModel, StreamingSession]:
    """Checks the source (if any), loads the model and builds the streaming session."""
    if config.capture is not None:
        try:
            probe_source(config)
        except SourceError as err:
            raise StartupError(str(err)) from err
    print(f"loading {config.model.model} ...", file=sys.stderr, flush=True)
    try:
        loaded = load_model(config.model, text_attention=register_attention())
        session = StreamingSession(loaded, config.cache, config.session)
    except (ModelLoadError, ValueError) as err:
        raise StartupError(str(err)) from err
    print(
        f"model ready: {loaded.family} on {loaded.device} ({str(loaded.dtype).removeprefix('torch.')}); "
        f"cache: {config.cache.policy}, budget {config.cache.budget}, window {config.cache.window}, "
        f"bias {config.cache.bias:g}",
        file=sys.stderr,
        flush=True,
    )
    return loaded, session


def memory_fields(monitor: MemoryMonitor):
    """Extra answer-event fields from the memory monitor."""

    def sample() -> dict:
        s = monitor.sample()
        return {
            "memory_backend": s.backend,
            "memory_label": s.label,
            "device_used_bytes": s.device_used_bytes,
            "device_total_bytes": s.device_total_bytes,
        }

    return sample
