"""Memory readings the session reports with every round: device memory and process RSS (bytes)."""

from __future__ import annotations

import psutil
import torch

_PROCESS = psutil.Process()


def device_memory_bytes(device: torch.device) -> int | None:
    """Bytes torch has allocated on a CUDA device; None on CPU (see process RSS there)."""
    if device.type == "cuda":
        return int(torch.cuda.memory_allocated(device))
    return None


def process_rss_bytes() -> int:
    return int(_PROCESS.memory_info().rss)
