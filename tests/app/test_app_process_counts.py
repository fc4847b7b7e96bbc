"""Answer events count this process's OS threads and open file descriptors (what a day-long soak watches)."""

import threading

from app.startup import memory_fields
from monitor.memory_monitor import MemoryMonitor


def test_answer_fields_follow_threads_and_file_descriptors(tmp_path):
    with MemoryMonitor("cpu") as monitor:
        sample = memory_fields(monitor)
        before = sample()
        release = threading.Event()
        worker = threading.Thread(target=release.wait, name="held-open")
        worker.start()
        with (tmp_path / "f").open("w"):
            during = sample()
        release.set()
        worker.join()
        after = sample()
    assert before["process_threads"] >= threading.active_count() and before["process_open_fds"] >= 3
    assert during["process_threads"] == before["process_threads"] + 1
    assert during["process_open_fds"] == before["process_open_fds"] + 1
    counts = ("process_threads", "process_open_fds")
    assert [after[k] for k in counts] == [before[k] for k in counts]
