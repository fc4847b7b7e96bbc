"""Memory backends behind `monitor.memory_monitor.MemoryMonitor`: one small module per source.

Every backend has `name`, `label`, `read() -> DeviceReading` and `close()`.
"""

from monitor.backends.base import DeviceReading, MemoryBackend

__all__ = ["DeviceReading", "MemoryBackend"]
