"""Jetson memory from `tegrastats`: a pure line parser, and a backend that reads the tool in a thread.

A tegrastats line (JetPack 6, Orin Nano) looks like:

    11-02-2025 14:03:11 RAM 3162/7620MB (lfb 4x2MB) SWAP 0/3810MB (cached 0MB)
    CPU [1%@729,0%@729,off,off] GR3D_FREQ 1% cpu@62.8C ... VDD_IN 3913mW/3922mW ...

(one line; wrapped here). Field sets differ by board and release: AGX Orin reports the rails
VDD_GPU_SOC/VDD_CPU_CV/VIN_SYS_5V0, Orin NX/Nano VDD_IN/VDD_CPU_GPU_CV/VDD_SOC; newer releases
print `GR3D_FREQ 26%@[306]` and `cpu@52.9C/52.9C`. The parser keeps whatever it recognises and
requires only the RAM field. tegrastats' "MB" are MiB (it divides /proc/meminfo's KiB by 1024).
"""

from __future__ import annotations

import logging
import re
import shutil
import subprocess
import threading
from collections.abc import Callable
from typing import Any

from monitor.backends.base import DeviceReading

logger = logging.getLogger(__name__)

_UNIT_BYTES = {"B": 1, "kB": 1024, "KB": 1024, "MB": 1024**2, "GB": 1024**3}
_TIMESTAMP = re.compile(r"^(\d{2}-\d{2}-\d{4} \d{2}:\d{2}:\d{2})\s")
_RAM = re.compile(r"\bRAM (\d+)/(\d+)(kB|MB|GB)(?: \(lfb (\d+)x(\d+)(kB|MB)\))?")
_SWAP = re.compile(r"\bSWAP (\d+)/(\d+)(kB|MB|GB)(?: \(cached (\d+)(kB|MB|GB)\))?")
_CPU = re.compile(r"\bCPU \[([^\]]*)\]")
_CORE = re.compile(r"(\d+)%@(\d+)")
_GR3D = re.compile(r"\bGR3D_FREQ (?:(\d+)%)?(?:@\[?([\d,]+)\]?)?")
_EMC = re.compile(r"\bEMC_FREQ (?:(\d+)%)?(?:@(\d+))?")
# "cpu@52.968C" or, on newer releases, "cpu@52.968C/52.968C"; unpopulated sensors read -256C.
_TEMP = re.compile(r"\b([A-Za-z][\w]*)@(-?\d+(?:\.\d+)?)C\b")
# "VDD_IN 3913mW/3922mW", "VDD_GPU_SOC 4385mW/3787mW/4385mW" (now/avg/max), "VDDQ_VDD2_1V8AO 503mW/503mW"
# or, on older boards, "POM_5V_IN 3210/3400".
_RAIL = re.compile(r"\b((?:VDD|VIN|POM)[A-Z0-9]*_\w+) (\d+)(?:mW)?/(\d+)(?:mW)?")
_ABSENT_SENSOR_C = -256.0


def _bytes(value: str, unit: str) -> int:
    return int(value) * _UNIT_BYTES[unit]


def parse_tegrastats_line(line: str) -> dict[str, Any]:
    """Parse one tegrastats output line into plain values (bytes, percent, MHz, degrees C, mW).

    Keys: ram_used_bytes, ram_total_bytes (always); when present: timestamp, lfb_blocks,
    lfb_block_bytes, swap_used_bytes, swap_total_bytes, swap_cached_bytes, cpu (list of
    {"load_pct", "freq_mhz"}, both None for an offline core), gpu_load_pct, gpu_freq_mhz (list, one
    per GPC), emc_load_pct, emc_freq_mhz, temps_c ({sensor: C}), power_mw ({rail: {"now", "avg"}}).
    Raises ValueError when the line has no RAM field (not a tegrastats line).
    """
    ram = _RAM.search(line)
    if ram is None:
        raise ValueError(f"not a tegrastats line (no RAM field): {line[:80]!r}")
    out: dict[str, Any] = {
        "ram_used_bytes": _bytes(ram[1], ram[3]),
        "ram_total_bytes": _bytes(ram[2], ram[3]),
    }
    if ram[4] is not None:
        out["lfb_blocks"] = int(ram[4])
        out["lfb_block_bytes"] = _bytes(ram[5], ram[6])
    if (stamp := _TIMESTAMP.search(line)) is not None:
        out["timestamp"] = stamp[1]
    if (swap := _SWAP.search(line)) is not None:
        out["swap_used_bytes"] = _bytes(swap[1], swap[3])
        out["swap_total_bytes"] = _bytes(swap[2], swap[3])
        if swap[4] is not None:
            out["swap_cached_bytes"] = _bytes(swap[4], swap[5])
    if (cpu := _CPU.search(line)) is not None:
        out["cpu"] = [_parse_core(core) for core in cpu[1].split(",") if core.strip()]
    if (gr3d := _GR3D.search(line)) is not None:
        out["gpu_load_pct"] = int(gr3d[1]) if gr3d[1] is not None else None
        out["gpu_freq_mhz"] = [int(f) for f in gr3d[2].split(",")] if gr3d[2] else []
    if (emc := _EMC.search(line)) is not None:
        out["emc_load_pct"] = int(emc[1]) if emc[1] is not None else None
        out["emc_freq_mhz"] = int(emc[2]) if emc[2] is not None else None
    temps = {name: float(c) for name, c in _TEMP.findall(line) if float(c) != _ABSENT_SENSOR_C}
    if temps:
        out["temps_c"] = temps
    rails = {name: {"now": int(now), "avg": int(avg)} for name, now, avg in _RAIL.findall(line)}
    if rails:
        out["power_mw"] = rails
    return out


def _parse_core(text: str) -> dict[str, int | None]:
    match = _CORE.fullmatch(text.strip())
    if match is None:  # "off": the core is powered down
        return {"load_pct": None, "freq_mhz": None}
    return {"load_pct": int(match[1]), "freq_mhz": int(match[2])}


def tegrastats_reading(fields: dict[str, Any]) -> DeviceReading:
    """Unified memory: the GPU allocates from RAM, so device memory = RAM. Per-process GPU memory
    is not visible in tegrastats (torch's own counters give it for this process)."""
    return DeviceReading(used_bytes=fields["ram_used_bytes"], total_bytes=fields["ram_total_bytes"])


class TegrastatsBackend:
    """Runs `tegrastats --interval MS` as a child process; a thread keeps the latest parsed line.

    `close()` stops the child (terminate, then kill) and joins the thread; it is safe to call twice.
    """

    name = "tegrastats"
    label = "unified memory (tegrastats)"

    def __init__(
        self,
        interval_s: float = 1.0,
        command: str = "tegrastats",
        popen: Callable[..., subprocess.Popen] = subprocess.Popen,
        first_line_timeout_s: float | None = None,
    ) -> None:
        executable = shutil.which(command)
        if executable is None:
            raise FileNotFoundError(f"{command!r} not found on PATH")
        interval_ms = max(1, round(interval_s * 1000))
        self._proc = popen(
            [executable, "--interval", str(interval_ms)],
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            stdin=subprocess.DEVNULL,
            text=True,
            bufsize=1,  # line-buffered: each sample arrives as soon as tegrastats prints it
        )
        self._lock = threading.Lock()
        self._latest: dict[str, Any] | None = None
        self._first = threading.Event()
        self._closed = False
        self.lines_read = 0
        self.lines_rejected = 0
        self._thread = threading.Thread(target=self._read_loop, name="tegrastats-reader", daemon=True)
        self._thread.start()
        # Wait (bounded) for the first sample so that the first read() already has numbers.
        timeout = first_line_timeout_s if first_line_timeout_s is not None else 2 * interval_s + 1.0
        if not self._first.wait(timeout):
            logger.warning("tegrastats printed nothing within %.1f s", timeout)

    def _read_loop(self) -> None:
        assert self._proc.stdout is not None
        for line in self._proc.stdout:  # ends when the child exits or its pipe is closed
            try:
                fields = parse_tegrastats_line(line)
            except ValueError:
                self.lines_rejected += 1
                continue
            with self._lock:
                self._latest = fields
                self.lines_read += 1
            self._first.set()
        self._first.set()

    def latest_fields(self) -> dict[str, Any] | None:
        """The most recent parsed tegrastats line (temperatures, power, ...), or None before the first."""
        with self._lock:
            return self._latest

    def read(self) -> DeviceReading:
        fields = self.latest_fields()
        return tegrastats_reading(fields) if fields is not None else DeviceReading()

    @property
    def running(self) -> bool:
        return self._proc.poll() is None

    def close(self, timeout_s: float = 5.0) -> None:
        if self._closed:
            return
        self._closed = True
        if self._proc.poll() is None:
            self._proc.terminate()
            try:
                self._proc.wait(timeout=timeout_s)
            except subprocess.TimeoutExpired:
                self._proc.kill()
                self._proc.wait(timeout=timeout_s)
        self._thread.join(timeout=timeout_s)
        if self._proc.stdout is not None:
            self._proc.stdout.close()
