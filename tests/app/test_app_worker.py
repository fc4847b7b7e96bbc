"""The one background worker shape (bus/worker.py): bounded queue with drops counted and reported, delivery in
order on its own thread, close with a deadline that abandons (and counts) what is left, a crash reported by
type and the thread restarted; a subscriber behind it never holds up the publishing thread; and the hooks a
writer such as the timeline's takes (batches, idle, finish, drops reported apart, stop)."""

from __future__ import annotations

import threading

from bus import EventBus, Status, StatusKind
from bus.supervisor import RestartPolicy
from bus.worker import BackgroundWorker, BatchWorker, QueuedSubscriber

WAIT_S = 20.0


def test_a_full_queue_drops_the_oldest_counts_and_reports_and_the_rest_arrive_in_order():
    got, errors, done = [], [], threading.Event()

    def send(item: int) -> None:
        got.append(item)
        if item == 9:
            done.set()

    worker = BackgroundWorker("numbers", send, queue_size=4, on_error=errors.append, items="numbers")
    for i in range(10):  # not started: nothing is taken out, six are dropped
        worker.put(i)
    assert worker.dropped == 6
    worker.start()
    assert done.wait(WAIT_S)
    worker.close(timeout=5.0)
    assert got == [6, 7, 8, 9]
    assert errors == ["numbers: queue full, 6 numbers dropped so far (oldest first)"]
    assert not worker.put(10)  # closed: not taken


def test_close_abandons_what_its_deadline_leaves_and_counts_it():
    errors: list[str] = []
    started = threading.Event()

    def send(item: int) -> None:  # a send that waits (a retry's backoff) waits on `aborted`
        started.set()
        worker.aborted.wait(WAIT_S)

    worker = BackgroundWorker("slow", send, queue_size=8, on_error=errors.append, abort_grace_s=WAIT_S)
    worker.start()
    for i in range(5):
        worker.put(i)
    assert started.wait(WAIT_S)
    worker.close(timeout=0.2)  # the deadline passes while the first send waits: the other four are abandoned
    assert not worker._thread.is_alive()
    assert worker.dropped == 4 and errors == ["slow: 4 items abandoned at shutdown"], errors


def test_a_crashing_send_is_reported_by_type_and_the_worker_goes_on():
    got, errors, done = [], [], threading.Event()

    def send(item: str) -> None:
        if item == "bad":
            raise RuntimeError("secret-token in the text")
        got.append(item)
        if item == "last":
            done.set()

    fast = RestartPolicy(backoff_s=0.0)
    worker = BackgroundWorker("w", send, on_error=errors.append, restarts=fast)
    worker.start()
    for item in ("first", "bad", "last"):
        worker.put(item)
    assert done.wait(WAIT_S)
    worker.close()
    assert got == ["first", "last"]
    assert len(errors) == 1 and "w: worker crashed (RuntimeError)" in errors[0] and "secret" not in errors[0]


def test_a_slow_subscriber_behind_a_queue_never_holds_up_the_publisher():
    held, seen = threading.Event(), []

    def slow_terminal(event) -> None:
        held.wait(WAIT_S)
        seen.append(event.message)

    queued = QueuedSubscriber("terminal", slow_terminal)
    bus = EventBus()
    bus.subscribe(queued)
    queued.start()
    published = threading.Event()

    def publish() -> None:
        for i in range(3):
            bus.publish(Status(kind=StatusKind.INFO, message=f"m{i}"))
        published.set()

    threading.Thread(target=publish).start()
    assert published.wait(WAIT_S), "publish waited on the subscriber"
    assert seen == []  # nothing printed yet: the subscriber is still held
    held.set()
    queued.close(timeout=WAIT_S)
    assert seen == ["m0", "m1", "m2"]


def test_a_batch_worker_takes_what_is_queued_at_once_up_to_its_batch():
    batches, done = [], threading.Event()

    def send_batch(items: list[int]) -> None:
        batches.append(items)
        if items[-1] == 6:
            done.set()

    worker = BatchWorker("rows", send_batch, max_batch=3)
    for i in range(7):  # queued before it starts: taken three at a time, oldest first
        worker.put(i)
    worker.start()
    assert done.wait(WAIT_S)
    worker.close()
    assert batches == [[0, 1, 2], [3, 4, 5], [6]]


def test_hooks_idle_finish_on_its_thread_and_drops_reported_apart():
    errors, drops, idle, finished = [], [], threading.Event(), []
    worker = BackgroundWorker(
        "w",
        lambda item: None,
        queue_size=1,
        on_error=errors.append,
        on_drops=drops.append,
        idle=idle.set,
        finish=lambda: finished.append(threading.current_thread().name),
    )
    worker.put(1)
    worker.put(2)  # drops 1
    worker.start()
    assert idle.wait(WAIT_S)  # nothing queued any more: the idle hook runs
    worker.close()
    worker.close()  # twice: finished once
    assert finished == ["w"] and errors == []
    assert drops == ["w: queue full, 1 items dropped so far (oldest first)"]
    never = BackgroundWorker("never", lambda item: None, on_drops=drops.append, finish=lambda: finished.append("x"))
    never.put(1)
    never.close()  # never started: finished in close, the queued item abandoned and reported apart
    never.close()
    assert finished == ["w", "x"] and drops[-1] == "never: 1 items abandoned at shutdown" and errors == []


def test_stop_from_send_discards_what_is_queued_without_a_report():
    got, errors = [], []

    def send(item: int) -> None:
        got.append(item)
        if item == 0:
            worker.stop()  # the output is gone for good (the owner reported why)

    worker = BackgroundWorker("gone", send, on_error=errors.append)
    for i in range(5):
        worker.put(i)
    worker.start()
    worker.close(timeout=WAIT_S)
    assert got == [0] and errors == [] and worker.dropped == 0
    assert worker.closed and not worker.put(9)
