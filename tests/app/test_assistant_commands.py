"""The assistant's commands to its model worker (app/worker_commands.py): typed, dispatched by type, every one
refused rather than waited for when the queue is full, so that a removal can never hold the lock the worker's stop
needs (the hang issue 52 found: `remove_stream` blocked on a full queue while holding `_adding`, the stopping worker
waiting for `_adding`). The thread joins below have bounds only so that a hang fails instead of stalling the suite."""

from __future__ import annotations

import threading

import pytest

from app.assistant import _MAX_COMMANDS, Assistant, RunLimits
from app.stream import Stream
from app.worker_commands import RemoveStream, ResetStream
from bus import EventBus
from bus.input_limits import AssistantBusy
from cache.config import CacheConfig
from model.session import SessionConfig, StreamingSession
from tests.support.session_helpers import loaded
from watches.scheduler import StandingQuestion


def two_streams() -> Assistant:
    model = loaded("tiny-qwen2-vl")
    streams = [
        Stream(name, StreamingSession(model, CacheConfig(budget=64, window=8), SessionConfig(max_new_tokens=2)),
               StandingQuestion(every_s=0.0))
        for name in ("a", "b")
    ]  # fmt: skip
    return Assistant(streams, EventBus(), RunLimits(end_with_stream=False), first_stays=False)


def fill(assistant: Assistant) -> None:
    for _ in range(_MAX_COMMANDS):
        assistant.reset("b")
    with pytest.raises(AssistantBusy):
        assistant.reset("b")


def removal_outcome(assistant: Assistant, name: str) -> BaseException | None:
    """What `remove_stream(name)` raised (None: nothing), called on a thread of its own; fails if it waits."""
    outcome: list[BaseException | None] = []

    def remove() -> None:
        try:
            assistant.remove_stream(name)
        except Exception as err:
            outcome.append(err)
        else:
            outcome.append(None)

    caller = threading.Thread(target=remove, daemon=True)
    caller.start()
    caller.join(10)
    assert not caller.is_alive(), "remove_stream waited on the full queue"
    return outcome[0]


def test_a_removal_on_a_full_queue_is_refused_at_once_and_changes_nothing():
    assistant = two_streams()  # the worker not started: nothing drains the queue
    fill(assistant)
    assert isinstance(removal_outcome(assistant, "a"), AssistantBusy)
    assert list(assistant.streams) == ["a", "b"] and assistant.default.name == "a"  # nothing changed
    assert assistant.schedule is assistant.default.schedule


def test_a_stop_while_the_queue_is_full_and_a_removal_is_asked_ends_the_worker():
    assistant = two_streams()
    entered, release = threading.Event(), threading.Event()
    run = assistant._run_command

    def slow_first(command):  # the worker holds the first command until released: the queue fills behind it
        if not entered.is_set():
            entered.set()
            release.wait(30)
        run(command)

    assistant._run_command = slow_first
    assistant.start()
    assistant.reset("b")
    assert entered.wait(30)
    fill(assistant)
    assert isinstance(removal_outcome(assistant, "b"), AssistantBusy)
    assistant.stop_event.set()
    release.set()
    assert assistant.stop(timeout=30), "the worker did not end"
    assert list(assistant.streams) == ["a", "b"]


def test_a_removal_queued_at_the_stop_is_still_done_and_commands_are_types():
    assistant = two_streams()
    done = threading.Event()
    assistant.streams = {"a": assistant.streams["a"]}
    removed = two_streams().streams["b"]
    assistant._command(RemoveStream(removed, done))  # queued, the worker never started: its stop does it
    assistant.start()
    assistant.stop_event.set()
    assert assistant.stop(timeout=30) and done.is_set() and removed.finished
    with pytest.raises(TypeError, match="not an assistant command"):
        assistant._run_command(("reset", removed, None))  # the old tuple form is refused, not misread
    assistant._run_command(ResetStream(assistant.streams["a"]))
