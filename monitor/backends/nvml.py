"""Desktop/datacenter GPU memory from NVML (the `nvidia-ml-py` package, imported as `pynvml`).

NVML does not exist on Jetson (Orin and older); `monitor.memory_monitor.pick_backend` checks for Jetson first.
"""

from __future__ import annotations

import os
from typing import Any

from monitor.backends.base import DeviceReading


def process_bytes_from(processes: list[Any], pid: int) -> int | None:
    """Sum `usedGpuMemory` over NVML process entries of `pid`.

    None when the pid is not listed (e.g. inside a container, where NVML reports host pids) or when
    NVML cannot tell the amount (it reports None under some drivers and on WDDM).
    """
    amounts = [p.usedGpuMemory for p in processes if p.pid == pid]
    if not amounts or any(a is None for a in amounts):
        return None
    return int(sum(amounts))


class NvmlBackend:
    name = "nvml"

    def __init__(self, device_index: int = 0) -> None:
        import pynvml  # optional dependency: only needed on machines with an NVIDIA driver

        self._nvml = pynvml
        pynvml.nvmlInit()
        try:
            self._handle = pynvml.nvmlDeviceGetHandleByIndex(device_index)
            name = pynvml.nvmlDeviceGetName(self._handle)
        except pynvml.NVMLError:
            pynvml.nvmlShutdown()
            raise
        self.device_name = name.decode() if isinstance(name, bytes) else str(name)
        self.label = "GPU memory (NVML)"
        self._closed = False

    def read(self) -> DeviceReading:
        info = self._nvml.nvmlDeviceGetMemoryInfo(self._handle)
        return DeviceReading(
            used_bytes=int(info.used), total_bytes=int(info.total), process_bytes=self._process_bytes()
        )

    def _process_bytes(self) -> int | None:
        # A CUDA process is listed as "compute"; one that also draws (e.g. a desktop session) can be
        # listed in both lists with the same amount, so take the first list that knows this pid.
        for query in (
            self._nvml.nvmlDeviceGetComputeRunningProcesses,
            self._nvml.nvmlDeviceGetGraphicsRunningProcesses,
        ):
            try:
                found = process_bytes_from(query(self._handle), os.getpid())
            except self._nvml.NVMLError:
                continue  # not supported on this device/driver
            if found is not None:
                return found
        return None

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            self._nvml.nvmlShutdown()
