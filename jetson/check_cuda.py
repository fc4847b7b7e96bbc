"""Post-install check run by deploy.sh (and by hand): CUDA works from this venv's torch, and the
memory monitor picks the Jetson backend. Exit status 1 with a message when something is wrong."""

from __future__ import annotations

import sys

import torch

from monitor.memory_monitor import MemoryMonitor


def main() -> int:
    print(f"torch {torch.__version__}, built for CUDA {torch.version.cuda}")
    if torch.version.cuda is None:
        print("this torch is a CPU-only build: install the JetPack CUDA wheel (see jetson/README.md)")
        return 1
    if not torch.cuda.is_available():
        print("torch cannot see the GPU: is the user in group 'video'? Does 'tegrastats' show GR3D_FREQ?")
        return 1
    print(f"device: {torch.cuda.get_device_name(0)}, capability {torch.cuda.get_device_capability(0)}")
    a = torch.randn(256, 256, device="cuda", dtype=torch.bfloat16)
    product = (a @ a.T).float()
    torch.cuda.synchronize()
    if not torch.isfinite(product).all():
        print("a bfloat16 matmul on the GPU gave non-finite values")
        return 1
    with MemoryMonitor() as monitor:
        sample = monitor.sample()
    total_gib = (sample.device_total_bytes or 0) / 2**30
    print(f"memory monitor: {monitor.backend} ({monitor.label}), {total_gib:.1f} GiB total")
    print("CUDA check passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
