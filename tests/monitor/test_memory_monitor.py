"""Memory monitor: tegrastats parsing against recorded lines of each board, backend choice on fake
machines, the tegrastats reader thread against a fake `tegrastats`, and the CPU backend for real."""

from __future__ import annotations

import dataclasses
import mmap
import os
import stat
import sys
import threading
from pathlib import Path
from types import SimpleNamespace

import psutil
import pytest

from monitor.backends.meminfo import MeminfoBackend, meminfo_reading, parse_meminfo
from monitor.backends.nvml import process_bytes_from
from monitor.backends.tegrastats import TegrastatsBackend, parse_tegrastats_line
from monitor.memory_monitor import MemoryMonitor, MemorySample, is_jetson, pick_backend

DATA = Path(__file__).parents[1] / "data" / "tegrastats"
MIB = 1024**2


def first_line(name: str) -> str:
    return (DATA / name).read_text().splitlines()[0]


# --- parsing recorded lines -------------------------------------------------------------------

AGX_RAILS = {"VDD_GPU_SOC", "VDD_CPU_CV", "VIN_SYS_5V0", "VDDQ_VDD2_1V8AO"}
NX_NANO_RAILS = {"VDD_IN", "VDD_CPU_GPU_CV", "VDD_SOC"}

# file -> (RAM used MiB, RAM total MiB, cores, online cores, GPU load %, GPU clocks MHz, rails)
BOARDS = {
    "agx_orin_64gb_r36.4.txt": (9731, 62841, 12, 12, 61, [1300, 1300], AGX_RAILS),
    "orin_nx_16gb_r36.4.txt": (5412, 15656, 8, 8, 47, [918], NX_NANO_RAILS),
    "orin_nano_8gb_r36.4.txt": (4204, 7620, 6, 6, 99, [1020], NX_NANO_RAILS),
    "orin_nano_8gb_r36.2_no_timestamp.txt": (2871, 7620, 6, 4, 0, [], NX_NANO_RAILS),
    "agx_orin_32gb_r35.txt": (3318, 30536, 8, 8, 12, [], AGX_RAILS),
    "agx_orin_64gb_now_avg_max.txt": (7433, 62817, 12, 12, 41, [], AGX_RAILS - {"VDDQ_VDD2_1V8AO"}),
}


@pytest.mark.parametrize("name", sorted(BOARDS))
def test_recorded_lines_of_each_board(name: str) -> None:
    used, total, cores, online, gpu_load, gpu_clocks, rails = BOARDS[name]
    fields = parse_tegrastats_line(first_line(name))
    assert fields["ram_used_bytes"] == used * MIB
    assert fields["ram_total_bytes"] == total * MIB
    assert len(fields["cpu"]) == cores
    assert sum(core["load_pct"] is not None for core in fields["cpu"]) == online
    assert fields["gpu_load_pct"] == gpu_load
    assert fields["gpu_freq_mhz"] == gpu_clocks
    assert set(fields["power_mw"]) == rails
    # Every line of every file parses (not only the first).
    for line in (DATA / name).read_text().splitlines():
        assert parse_tegrastats_line(line)["ram_total_bytes"] == total * MIB


def test_agx_orin_details() -> None:
    fields = parse_tegrastats_line(first_line("agx_orin_64gb_r36.4.txt"))
    assert fields["timestamp"] == "01-14-2025 10:22:31"
    assert (fields["lfb_blocks"], fields["lfb_block_bytes"]) == (2, 4 * MIB)
    assert fields["swap_total_bytes"] == 31421 * MIB
    assert fields["swap_used_bytes"] == fields["swap_cached_bytes"] == 0
    assert fields["cpu"][4] == {"load_pct": 20, "freq_mhz": 2201}
    assert (fields["emc_load_pct"], fields["emc_freq_mhz"]) == (9, 3199)
    # Unpopulated sensors (-256C) are dropped; real ones keep their decimals.
    assert "cv0" not in fields["temps_c"]
    assert fields["temps_c"]["gpu"] == pytest.approx(49.125)
    assert fields["power_mw"]["VDD_GPU_SOC"] == {"now": 9821, "avg": 7113}


def test_offline_cores_and_missing_fields() -> None:
    fields = parse_tegrastats_line(first_line("orin_nano_8gb_r36.2_no_timestamp.txt"))
    assert fields["cpu"][-1] == {"load_pct": None, "freq_mhz": None}
    assert "timestamp" not in fields
    assert "emc_load_pct" not in fields


def test_upper_case_sensors_of_r35() -> None:
    fields = parse_tegrastats_line(first_line("agx_orin_32gb_r35.txt"))
    assert fields["temps_c"]["CPU"] == pytest.approx(44.25)
    assert fields["temps_c"]["Tboard"] == 31.0
    assert "GPU" not in fields["temps_c"]  # GPU@-256C on this line
    assert fields["emc_load_pct"] == 0 and fields["emc_freq_mhz"] is None


def test_now_avg_max_rails_and_now_max_temperatures() -> None:
    fields = parse_tegrastats_line(first_line("agx_orin_64gb_now_avg_max.txt"))
    assert fields["power_mw"]["VDD_CPU_CV"] == {"now": 1312, "avg": 966}
    assert fields["temps_c"]["soc0"] == pytest.approx(48.218)  # the current value, not the max
    assert "swap_used_bytes" not in fields


def test_other_units_and_bare_rails() -> None:
    fields = parse_tegrastats_line(
        "RAM 4722/7844MB (lfb 1x512kB) EMC_FREQ 2%@1866 GR3D_FREQ @[1000,1000] POM_5V_IN 3210/3400"
    )
    assert fields["lfb_block_bytes"] == 512 * 1024
    assert fields["gpu_load_pct"] is None and fields["gpu_freq_mhz"] == [1000, 1000]
    assert fields["power_mw"]["POM_5V_IN"] == {"now": 3210, "avg": 3400}


@pytest.mark.parametrize("line", ["", "hello", "IRAM 0/252kB(lfb 252kB) CPU [1%@102]"])
def test_non_tegrastats_lines_are_rejected(line: str) -> None:
    with pytest.raises(ValueError, match="not a tegrastats line"):
        parse_tegrastats_line(line)


# --- /proc/meminfo ----------------------------------------------------------------------------

MEMINFO = (
    "MemTotal:        7803084 kB\nMemFree:          512000 kB\nMemAvailable:    3901542 kB\nHugePages_Total:       0\n"
)


def test_meminfo_used_is_total_minus_available() -> None:
    assert parse_meminfo(MEMINFO)["HugePages_Total"] == 0
    reading = meminfo_reading(MEMINFO)
    assert reading.total_bytes == 7803084 * 1024
    assert reading.used_bytes == (7803084 - 3901542) * 1024
    with pytest.raises(ValueError):
        meminfo_reading("MemTotal: 1 kB\n")


def test_meminfo_backend_reads_this_machine() -> None:
    backend = MeminfoBackend()
    reading = backend.read()
    assert reading.total_bytes == psutil.virtual_memory().total
    assert 0 < reading.used_bytes < reading.total_bytes


# --- NVML process accounting (pure part) ---------------------------------------------------------


def test_nvml_process_bytes() -> None:
    procs = [SimpleNamespace(pid=7, usedGpuMemory=100), SimpleNamespace(pid=8, usedGpuMemory=5)]
    assert process_bytes_from(procs, 7) == 100
    assert process_bytes_from(procs, 9) is None  # not listed, e.g. another pid namespace
    assert process_bytes_from([SimpleNamespace(pid=7, usedGpuMemory=None)], 7) is None


NVML_NAMES = (
    "nvmlInit",
    "nvmlShutdown",
    "nvmlDeviceGetHandleByIndex",
    "nvmlDeviceGetName",
    "nvmlDeviceGetMemoryInfo",
    "nvmlDeviceGetComputeRunningProcesses",
    "nvmlDeviceGetGraphicsRunningProcesses",
    "NVMLError",
)


def fake_pynvml(*, init_error: bool = False, compute: list | None = None) -> SimpleNamespace:
    """A stand-in for the pynvml module (no NVIDIA driver here); records init/shutdown."""

    class NVMLError(Exception):
        pass

    calls: list[str] = []

    def init() -> None:
        calls.append("init")
        if init_error:
            raise NVMLError("Driver Not Loaded")

    def graphics(handle: object) -> list:
        raise NVMLError("Not Supported")

    return SimpleNamespace(
        calls=calls,
        NVMLError=NVMLError,
        nvmlInit=init,
        nvmlShutdown=lambda: calls.append("shutdown"),
        nvmlDeviceGetHandleByIndex=lambda i: f"gpu{i}",
        nvmlDeviceGetName=lambda h: b"NVIDIA H200",
        nvmlDeviceGetMemoryInfo=lambda h: SimpleNamespace(used=30 * MIB, total=140_000 * MIB, free=0),
        nvmlDeviceGetComputeRunningProcesses=lambda h: compute or [],
        nvmlDeviceGetGraphicsRunningProcesses=graphics,
    )


def test_the_real_pynvml_has_the_calls_the_backend_uses() -> None:
    pynvml = pytest.importorskip("pynvml")
    assert all(hasattr(pynvml, name) for name in NVML_NAMES)


def test_nvml_backend_reads_device_and_process_memory(monkeypatch: pytest.MonkeyPatch) -> None:
    fake = fake_pynvml(compute=[SimpleNamespace(pid=os.getpid(), usedGpuMemory=12 * MIB)])
    monkeypatch.setitem(sys.modules, "pynvml", fake)
    with MemoryMonitor("nvml") as monitor:
        sample = monitor.sample()
    assert (monitor.backend, sample.label) == ("nvml", "GPU memory (NVML)")
    assert (sample.device_used_bytes, sample.device_total_bytes) == (30 * MIB, 140_000 * MIB)
    assert sample.process_device_bytes == 12 * MIB  # the graphics query's error was skipped
    assert fake.calls == ["init", "shutdown"]


def test_pc_whose_nvml_fails_falls_back_to_cpu(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("EDGE_ASSISTANT_MEMORY_BACKEND", raising=False)
    monkeypatch.setitem(sys.modules, "pynvml", fake_pynvml(init_error=True))
    assert pick_backend(root=fake_root(tmp_path / "pc", jetson=False)).name == "cpu"
    monkeypatch.setitem(sys.modules, "pynvml", fake_pynvml())
    assert pick_backend(root=fake_root(tmp_path / "gpu", jetson=False)).name == "nvml"


# --- which backend a machine gets ---------------------------------------------------------------


def fake_root(tmp_path: Path, *, jetson: bool) -> Path:
    (tmp_path / "proc/device-tree").mkdir(parents=True)
    (tmp_path / "etc").mkdir()
    (tmp_path / "proc/meminfo").write_text(MEMINFO)
    if jetson:
        (tmp_path / "proc/device-tree/model").write_bytes(b"NVIDIA Jetson Orin Nano Developer Kit\0")
    return tmp_path


def test_jetson_detection(tmp_path: Path) -> None:
    assert is_jetson(fake_root(tmp_path / "j", jetson=True))
    assert not is_jetson(fake_root(tmp_path / "pc", jetson=False))
    release_only = fake_root(tmp_path / "r", jetson=False)
    (release_only / "etc/nv_tegra_release").write_text("# R36 (release), REVISION: 4.3\n")
    assert is_jetson(release_only)


def test_jetson_without_tegrastats_uses_meminfo(tmp_path: Path) -> None:
    backend = pick_backend(root=fake_root(tmp_path, jetson=True), which=lambda _: None)
    assert backend.name == "meminfo"
    assert backend.read().total_bytes == 7803084 * 1024  # read from the fake root, not this machine


def test_pc_without_gpu_uses_cpu(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("EDGE_ASSISTANT_MEMORY_BACKEND", raising=False)
    monkeypatch.setitem(sys.modules, "pynvml", fake_pynvml(init_error=True))  # as without a driver
    assert pick_backend(root=fake_root(tmp_path, jetson=False)).name == "cpu"


def test_override_by_argument_and_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = fake_root(tmp_path, jetson=True)
    assert pick_backend("cpu", root=root).name == "cpu"
    monkeypatch.setenv("EDGE_ASSISTANT_MEMORY_BACKEND", "cpu")
    assert pick_backend(root=root, which=lambda _: "/usr/bin/tegrastats").name == "cpu"
    with pytest.raises(ValueError, match="choose one of nvml, tegrastats, meminfo, cpu"):
        pick_backend("gpu", root=root)


def test_forced_tegrastats_without_the_tool_is_an_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", "/nonexistent")
    with pytest.raises(FileNotFoundError):
        pick_backend("tegrastats")


# --- the tegrastats reader thread, against a fake tegrastats --------------------------------------


def write_fake_tegrastats(bin_dir: Path, lines_file: Path, *, ignore_sigterm: bool = False) -> Path:
    """A stand-in `tegrastats` that prints the recorded lines every --interval ms, forever."""
    bin_dir.mkdir(parents=True, exist_ok=True)
    script = bin_dir / "tegrastats"
    sigterm = "signal.signal(signal.SIGTERM, signal.SIG_IGN)\n" if ignore_sigterm else ""
    script.write_text(
        f"#!{sys.executable}\n"
        "import signal, sys, time\n"
        f"{sigterm}"
        "interval = int(sys.argv[sys.argv.index('--interval') + 1]) / 1000\n"
        f"lines = open({str(lines_file)!r}).read().splitlines()\n"
        "print('tegrastats: a banner line that is not a sample', flush=True)\n"
        "i = 0\n"
        "while True:\n"
        "    print(lines[i % len(lines)], flush=True)\n"
        "    i += 1\n"
        "    time.sleep(interval)\n"
    )
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    return script


def test_tegrastats_backend_reads_and_stops(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    write_fake_tegrastats(tmp_path / "bin", DATA / "orin_nano_8gb_r36.4.txt")
    monkeypatch.setenv("PATH", f"{tmp_path / 'bin'}{os.pathsep}{os.environ['PATH']}")
    threads_before = threading.active_count()
    backend = TegrastatsBackend(interval_s=0.05, first_line_timeout_s=10)
    try:
        reading = backend.read()
        assert reading.total_bytes == 7620 * MIB
        assert reading.used_bytes in (4204 * MIB, 4211 * MIB)
        assert backend.lines_rejected == 1  # the banner
        assert backend.latest_fields()["gpu_freq_mhz"] == [1020]
        pid = backend._proc.pid
    finally:
        backend.close()
    assert not backend.running
    assert not psutil.pid_exists(pid) or psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    assert threading.active_count() == threads_before  # the reader thread was joined
    backend.close()  # a second close is harmless


def test_tegrastats_backend_kills_a_child_that_ignores_sigterm(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    write_fake_tegrastats(tmp_path / "bin", DATA / "orin_nx_16gb_r36.4.txt", ignore_sigterm=True)
    monkeypatch.setenv("PATH", f"{tmp_path / 'bin'}{os.pathsep}{os.environ['PATH']}")
    backend = TegrastatsBackend(interval_s=0.05, first_line_timeout_s=10)
    assert backend.read().total_bytes == 15656 * MIB
    backend.close(timeout_s=0.5)
    assert not backend.running
    assert backend._proc.returncode == -9  # SIGKILL after SIGTERM was ignored


def test_monitor_on_a_jetson_with_tegrastats(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    write_fake_tegrastats(tmp_path / "bin", DATA / "agx_orin_64gb_r36.4.txt")
    monkeypatch.setenv("PATH", f"{tmp_path / 'bin'}{os.pathsep}{os.environ['PATH']}")
    backend = pick_backend(root=fake_root(tmp_path / "root", jetson=True), interval_s=0.05)
    with MemoryMonitor(backend) as monitor:
        sample = monitor.sample()
    assert monitor.backend == "tegrastats"
    assert sample.label == "unified memory (tegrastats)"
    assert sample.device_total_bytes == 62841 * MIB
    assert sample.process_device_bytes is None  # tegrastats cannot attribute GPU memory to a process
    assert not backend.running


def test_jetson_with_a_silent_tegrastats_falls_back_to_meminfo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "tegrastats").write_text("#!/bin/sh\necho 'tegrastats: permission denied' >&2\nexit 1\n")
    (bin_dir / "tegrastats").chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    backend = pick_backend(root=fake_root(tmp_path / "root", jetson=True), interval_s=0.05)
    assert backend.name == "meminfo"


# --- the CPU backend, for real -------------------------------------------------------------------


def test_cpu_monitor_samples_this_process() -> None:
    with MemoryMonitor("cpu") as monitor:
        assert (monitor.backend, monitor.label) == ("cpu", "process memory (CPU)")
        rss_now = psutil.Process().memory_info().rss
        before = monitor.sample()
        # touch 64 MiB of fresh pages so RSS must grow (an anonymous mapping: never memory the allocator already
        # holds from earlier tests, which a bytearray could reuse without RSS moving)
        ballast = mmap.mmap(-1, 64 * MIB)
        ballast[::4096] = b"\1" * len(ballast[::4096])
        after = monitor.sample()
    assert isinstance(before, MemorySample)
    assert before.device_used_bytes is None and before.process_device_bytes is None
    assert abs(before.process_rss_bytes - rss_now) < 16 * MIB
    assert after.process_rss_bytes - before.process_rss_bytes >= 48 * MIB
    assert after.t_wall >= before.t_wall
    assert set(after.as_dict()) == {f.name for f in dataclasses.fields(MemorySample)}
    del ballast


def test_torch_counters_stay_empty_without_cuda() -> None:
    torch = pytest.importorskip("torch")
    assert torch is sys.modules["torch"]
    sample = MemoryMonitor("cpu").sample()
    assert sample.torch_allocated_bytes is None and sample.torch_reserved_bytes is None
