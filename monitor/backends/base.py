"""What every memory backend returns, and the interface it implements."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol


@dataclass(frozen=True)
class DeviceReading:
    """One reading of accelerator memory, in bytes; None where the source cannot tell.

    On Jetson the GPU shares the system RAM (unified memory), so `used`/`total` are RAM figures.
    """

    used_bytes: int | None = None
    total_bytes: int | None = None
    process_bytes: int | None = None


class MemoryBackend(Protocol):
    name: str  # "nvml", "tegrastats", "meminfo" or "cpu"
    label: str  # what a plot axis should say, e.g. "GPU memory (NVML)"

    def read(self) -> DeviceReading: ...

    def close(self) -> None: ...


class CpuBackend:
    """No accelerator memory to report: only the process RSS (added by the monitor) is known."""

    name = "cpu"
    label = "process memory (CPU)"

    def read(self) -> DeviceReading:
        return DeviceReading()

    def close(self) -> None:
        pass
