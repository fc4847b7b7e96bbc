"""The event log is a record, not a display (issue 39): a burst of events far above the disk's speed loses none of
them (the publisher waits), while the terminal's queue may still skip."""

from __future__ import annotations

import json
import threading
import time

from bus import ErrorEvent, EventBus
from bus.worker import QueuedSubscriber
from outputs.event_log import LOG_QUEUE, JsonlLog, queued_log

BURST = 5 * LOG_QUEUE  # several times what the queue holds


class SlowFile:
    """A file that takes a millisecond for every 20 lines written: a disk far slower than the burst."""

    def __init__(self, file) -> None:
        self.file = file
        self.lines = 0

    def write(self, text: str) -> int:
        self.lines += 1
        if self.lines % 20 == 0:
            time.sleep(0.001)
        return self.file.write(text)

    def __getattr__(self, name: str):
        return getattr(self.file, name)


def test_a_burst_above_the_disks_speed_loses_no_record(tmp_path) -> None:
    path = tmp_path / "events.jsonl"
    log = JsonlLog(path)
    log._file = SlowFile(log._file)
    writer, terminal = queued_log(log), QueuedSubscriber("terminal", lambda event: time.sleep(0.001), queue_size=64)
    bus = EventBus()
    for subscriber in (writer, terminal):
        bus.subscribe(subscriber)
        subscriber.start()
    producer = threading.Thread(
        target=lambda: [bus.publish(ErrorEvent(where="burst", message=str(i))) for i in range(BURST)]
    )
    producer.start()
    producer.join(120)
    assert not producer.is_alive()
    writer.close(timeout=60)
    terminal.close(timeout=0.1)
    log.close()
    messages = [json.loads(line)["message"] for line in path.read_text().splitlines()]
    assert messages == [str(i) for i in range(BURST)]  # every one, once, in order
    assert writer.dropped == 0
    assert terminal.dropped > 0  # the display skips under the same burst
