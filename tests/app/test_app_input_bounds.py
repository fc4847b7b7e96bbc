"""People's input through the terminal: the real stdin reader on a pipe, and `python -m app --model tiny` (its
`main`, in this process, reading its questions from a real pipe) on a real video fed a megabyte question and a flood
of 10,000 questions."""

import contextlib
import functools
import os
import threading

import app.terminal
from terminal.stdin_questions import StdinQuestions
from tests.support.app_helpers import of_type, read_log, video
from tests.support.in_process_main import run_main

MEGABYTE = "why " * 262_144  # 1 MiB, one line


def _pipe_reader(text: str):
    """A real pipe whose read end is a text stream (select() needs a file descriptor); `text` is written on a
    thread, then the write end is closed."""
    read_fd, write_fd = os.pipe()
    reader = open(read_fd, encoding="utf-8")

    def write():
        with open(write_fd, "w", encoding="utf-8") as writer:
            writer.write(text)

    writer = threading.Thread(target=write)
    writer.start()
    return reader, writer


@contextlib.contextmanager
def _typed(monkeypatch, text: str):
    """While active, the terminal's questions come from a real pipe that `text` is written to on a thread (as
    `python -m app < file` reads them); afterwards the pipe is closed and the writer joined."""
    read_fd, write_fd = os.pipe()
    reader = open(read_fd, encoding="utf-8")

    def write():
        with contextlib.suppress(BrokenPipeError), open(write_fd, "w", encoding="utf-8") as writer:
            writer.write(text)  # a run that ended before reading it all closes the pipe: the rest is dropped

    writer = threading.Thread(target=write, name="typing")
    writer.start()
    monkeypatch.setattr(app.terminal, "StdinQuestions", functools.partial(StdinQuestions, stream=reader))
    try:
        yield
    finally:
        reader.close()
        writer.join(30)


def test_the_stdin_reader_skips_a_megabyte_line_and_goes_on():
    asked, said = [], []

    def ask(question, stream=None):
        if question == "refuse me":
            raise ValueError("busy: try again")
        asked.append((question, stream))

    reader, writer = _pipe_reader(f"{MEGABYTE}\nrefuse me\ndoor: is it open?\n{'x' * 2000}\n")
    questions = StdinQuestions(ask, stream=reader, poll_s=0.05, stream_names=["door"], max_chars=2000, say=said.append)
    questions.start()
    writer.join(30)
    questions._thread.join(30)  # ends at the end of input
    questions.stop()
    reader.close()
    assert asked == [("is it open?", "door"), ("x" * 2000, None)]
    assert len(said) == 2
    assert said[0].startswith("question refused: the question is too long (1048576 characters; at most 2000")
    assert said[1] == "question refused: busy: try again"


def test_a_megabyte_question_typed_in_the_terminal_is_refused_and_the_run_goes_on(tmp_path, capsys, monkeypatch):
    log = tmp_path / "events.jsonl"
    with _typed(monkeypatch, f"{MEGABYTE}\nwhat now?\n"):
        code, err = run_main(
            capsys, "--video", str(video(20)), "--model", "tiny", "--no-realtime", "--every", "0", "--budget", "256",
            "--window", "16", "--max-new-tokens", "4", "--quiet", "--log-jsonl", str(log),
        )  # fmt: skip
    assert code == 0, err[-2000:]
    assert "question refused: the question is too long (1048576 characters; at most 2000" in err
    events = read_log(log)
    assert [a.question for a in of_type(events, "answer")] == ["what now?"]
    assert of_type(events, "clip")[-1].stream_time == 20.0 and not of_type(events, "error")


def test_a_flood_of_typed_questions_never_starves_the_video(tmp_path, capsys, monkeypatch):
    """10,000 questions typed at once: a bounded few are queued and answered between clips, the rest are refused
    as busy, clips keep arriving and the run reaches --duration. Before questions were bounded, every one of them
    was answered before the next clip (0 clips; --duration never reached)."""
    log = tmp_path / "events.jsonl"
    with _typed(monkeypatch, "".join(f"what is happening, take {i}?\n" for i in range(10_000))):
        code, err = run_main(
            capsys, "--video", str(video(60)), "--model", "tiny", "--no-realtime", "--every", "0", "--duration",
            "24", "--budget", "256", "--window", "16", "--max-new-tokens", "4", "--quiet", "--log-jsonl", str(log),
        )  # fmt: skip
    assert code == 0, err[-2000:]
    events = read_log(log)
    assert [c.stream_time for c in of_type(events, "clip")] == [4.0 * k for k in range(1, 7)]
    assert any("reached --duration 24s" in e.message for e in of_type(events, "status"))
    answers = of_type(events, "answer")
    assert 0 < len(answers) < 10_000
    assert "question refused: busy: 16 questions are already waiting" in err
