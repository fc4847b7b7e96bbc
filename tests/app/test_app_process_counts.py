"""Answer events count this process's OS threads and open file descriptors (what a day-long soak watches).

The counts are process-wide: in a full suite another test's leftover thread (a server's, torch's pool) may start
or end between two readings. So each reading is checked against the kernel's own counts (/proc/self/task and
/proc/self/fd) taken just before and just after it, and the thread this test holds open must be among them."""

import os
import threading

from app.startup import memory_fields
from monitor.memory_monitor import MemoryMonitor


def os_threads() -> int:
    return len(os.listdir("/proc/self/task"))


def open_fds() -> int:
    return len(os.listdir("/proc/self/fd"))  # counts the listing's own descriptor, as psutil's num_fds does


def bracketed(sample) -> tuple[dict, dict, dict]:
    """(reading, lowest, highest) of the kernel's counts around one sample."""
    before = {"process_threads": os_threads(), "process_open_fds": open_fds()}
    reading = sample()
    after = {"process_threads": os_threads(), "process_open_fds": open_fds()}
    low = {k: min(before[k], after[k]) for k in before}
    high = {k: max(before[k], after[k]) for k in before}
    return reading, low, high


def assert_within(reading: dict, low: dict, high: dict) -> None:
    for key in ("process_threads", "process_open_fds"):
        assert low[key] <= reading[key] <= high[key], (key, reading[key], low[key], high[key])


def test_answer_fields_follow_threads_and_file_descriptors(tmp_path):
    with MemoryMonitor("cpu") as monitor:
        sample = memory_fields(monitor)
        before = bracketed(sample)
        release = threading.Event()
        worker = threading.Thread(target=release.wait, name="held-open")
        worker.start()
        try:
            assert str(worker.native_id) in os.listdir("/proc/self/task")
            with (tmp_path / "f").open("w") as held:
                during = bracketed(sample)
                assert str(held.fileno()) in os.listdir("/proc/self/fd")
        finally:
            release.set()
            worker.join()
        after = bracketed(sample)
    for reading in (before, during, after):
        assert_within(*reading)
    # OS threads, not Python's: at least every Python thread, and a descriptor count that includes stdin..stderr.
    assert before[0]["process_threads"] >= threading.active_count() and before[0]["process_open_fds"] >= 3
