"""Unified memory from /proc/meminfo: the fallback on Jetson when `tegrastats` is not installed."""

from __future__ import annotations

from pathlib import Path

from monitor.backends.base import DeviceReading


def parse_meminfo(text: str) -> dict[str, int]:
    """`/proc/meminfo` text -> {field: bytes}. Values given in kB are converted (the kernel's kB is KiB)."""
    fields: dict[str, int] = {}
    for line in text.splitlines():
        name, sep, rest = line.partition(":")
        parts = rest.split()
        if not sep or not parts or not parts[0].isdigit():
            continue
        scale = 1024 if len(parts) > 1 and parts[1] == "kB" else 1
        fields[name.strip()] = int(parts[0]) * scale
    return fields


def meminfo_reading(text: str) -> DeviceReading:
    """Used = MemTotal - MemAvailable: what the kernel could not hand to a new allocation right now."""
    fields = parse_meminfo(text)
    total = fields.get("MemTotal")
    available = fields.get("MemAvailable")
    if total is None or available is None:
        raise ValueError("meminfo text lacks MemTotal or MemAvailable")
    return DeviceReading(used_bytes=total - available, total_bytes=total)


class MeminfoBackend:
    name = "meminfo"
    label = "unified memory (/proc/meminfo)"

    def __init__(self, path: str | Path = "/proc/meminfo") -> None:
        self.path = Path(path)
        self.read()  # fail at construction, not at the first sample, if the file is unusable

    def read(self) -> DeviceReading:
        return meminfo_reading(self.path.read_text())

    def close(self) -> None:
        pass
