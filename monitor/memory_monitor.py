"""One memory monitor for every machine the assistant runs on; the backend is picked automatically.

    with MemoryMonitor() as monitor:        # or MemoryMonitor("meminfo") to force a backend
        print(monitor.backend, monitor.label)
        sample = monitor.sample()           # MemorySample, all sizes in bytes

Backends (`monitor.backend`):
- "nvml":       desktop NVIDIA GPU: device memory used/total and this process's share (nvidia-ml-py).
- "tegrastats": Jetson: unified memory (RAM shared by CPU and GPU) from `tegrastats`, read in a thread.
- "meminfo":    Jetson without `tegrastats` (e.g. in a container): unified memory from /proc/meminfo.
- "cpu":        anything else: no device memory, only the process RSS.
Every sample also carries the process RSS (psutil) and, when this process already uses CUDA through
torch, torch's allocated/reserved counters. torch is never imported here: it is read from
`sys.modules` only if the application imported it.

`python -m monitor.memory_monitor` prints a few samples: a quick check of which backend a machine gets.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import logging
import os
import shutil
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psutil

from monitor.backends.base import CpuBackend, MemoryBackend
from monitor.backends.meminfo import MeminfoBackend
from monitor.backends.tegrastats import TegrastatsBackend

logger = logging.getLogger(__name__)

BACKENDS = ("nvml", "tegrastats", "meminfo", "cpu")
ENV_OVERRIDE = "EDGE_ASSISTANT_MEMORY_BACKEND"  # same values as BACKENDS, or "auto"


@dataclass(frozen=True)
class MemorySample:
    """One memory reading. Sizes in bytes; None where the backend cannot tell. t_wall: time.time()."""

    t_wall: float
    backend: str
    device_used_bytes: int | None
    device_total_bytes: int | None
    process_device_bytes: int | None
    torch_allocated_bytes: int | None
    torch_reserved_bytes: int | None
    process_rss_bytes: int
    label: str

    def as_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def is_jetson(root: str | Path = "/") -> bool:
    """True on an NVIDIA Jetson (L4T), also inside a container, where /proc/device-tree is the host's."""
    root = Path(root)
    if (root / "etc/nv_tegra_release").is_file():
        return True
    for name in ("proc/device-tree/compatible", "proc/device-tree/model"):
        try:
            text = (root / name).read_bytes().decode(errors="replace")
        except OSError:
            continue
        if "nvidia,tegra" in text or "NVIDIA Jetson" in text:
            return True
    return False


def _nvml_backend() -> MemoryBackend | None:
    try:
        from monitor.backends.nvml import NvmlBackend

        return NvmlBackend()
    except ImportError:
        logger.debug("nvidia-ml-py is not installed")
    except Exception as exc:  # pynvml.NVMLError* when there is no driver or no GPU
        logger.debug("NVML unavailable: %s", exc)
    return None


def pick_backend(
    name: str | None = None,
    *,
    root: str | Path = "/",
    interval_s: float = 1.0,
    which: Callable[[str], str | None] = shutil.which,
) -> MemoryBackend:
    """Build the memory backend for this machine.

    name: one of BACKENDS to force one (an error if it cannot start), or None/"auto" to pick:
    Jetson -> tegrastats (meminfo when tegrastats is missing); else NVML when a GPU answers; else cpu.
    When name is None the environment variable EDGE_ASSISTANT_MEMORY_BACKEND may force one.
    root: filesystem root to inspect (tests point it at fake /etc and /proc trees).
    """
    if name is None:
        name = os.environ.get(ENV_OVERRIDE, "auto")
    if name not in (*BACKENDS, "auto"):
        raise ValueError(f"unknown memory backend {name!r}; choose one of {', '.join(BACKENDS)} or auto")
    root = Path(root)
    meminfo_path = root / "proc/meminfo"
    if name == "nvml":
        from monitor.backends.nvml import NvmlBackend

        return NvmlBackend()
    if name == "tegrastats":
        return TegrastatsBackend(interval_s=interval_s)
    if name == "meminfo":
        return MeminfoBackend(meminfo_path)
    if name == "cpu":
        return CpuBackend()
    if is_jetson(root):
        if which("tegrastats") is not None:
            try:
                tegrastats = TegrastatsBackend(interval_s=interval_s)
            except OSError as exc:
                logger.warning("tegrastats did not start (%s); using /proc/meminfo", exc)
            else:
                if tegrastats.latest_fields() is not None:
                    return tegrastats
                # e.g. in a container where the bind-mounted tool cannot read what it needs
                tegrastats.close()
                logger.warning("tegrastats printed no usable line; using /proc/meminfo")
        return MeminfoBackend(meminfo_path)
    nvml = _nvml_backend()
    return nvml if nvml is not None else CpuBackend()


def torch_cuda_bytes() -> tuple[int | None, int | None]:
    """(allocated, reserved) bytes on the current CUDA device, if this process already uses CUDA.

    Never imports torch nor initialises CUDA: both would cost seconds and memory in a process that
    does not use them.
    """
    torch = sys.modules.get("torch")
    if torch is None or not torch.cuda.is_available() or not torch.cuda.is_initialized():
        return None, None
    return int(torch.cuda.memory_allocated()), int(torch.cuda.memory_reserved())


class MemoryMonitor:
    """Samples memory through one backend. `close()` (or `with`) stops a tegrastats child process."""

    def __init__(self, backend: str | MemoryBackend | None = None, *, interval_s: float = 1.0) -> None:
        if backend is None or isinstance(backend, str):
            backend = pick_backend(backend, interval_s=interval_s)
        self._backend = backend
        self._process = psutil.Process()
        logger.info("memory monitor: %s (%s)", self.backend, self.label)

    @property
    def backend(self) -> str:
        return self._backend.name

    @property
    def label(self) -> str:
        return self._backend.label

    def sample(self) -> MemorySample:
        device = self._backend.read()
        allocated, reserved = torch_cuda_bytes()
        return MemorySample(
            t_wall=time.time(),
            backend=self.backend,
            device_used_bytes=device.used_bytes,
            device_total_bytes=device.total_bytes,
            process_device_bytes=device.process_bytes,
            torch_allocated_bytes=allocated,
            torch_reserved_bytes=reserved,
            process_rss_bytes=int(self._process.memory_info().rss),
            label=self.label,
        )

    def close(self) -> None:
        self._backend.close()

    def __enter__(self) -> MemoryMonitor:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Print memory samples as JSON lines.")
    parser.add_argument("--backend", default=None, choices=[*BACKENDS, "auto"], help="default: auto")
    parser.add_argument("--count", type=int, default=3, help="samples to print")
    parser.add_argument("--interval", type=float, default=1.0, help="seconds between samples")
    args = parser.parse_args(argv)
    with MemoryMonitor(args.backend, interval_s=args.interval) as monitor:
        for i in range(args.count):
            if i:
                time.sleep(args.interval)
            print(json.dumps(monitor.sample().as_dict()), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
