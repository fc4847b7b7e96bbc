"""`python -m app` with several streams in one process: one model, a session each, every event named by its
stream, answers of one stream untouched by the others, a network stream that is down kept local."""

import pytest

from bus import ErrorEvent, Status, WarningEvent
from tests.support.app_helpers import of_type, read_log, video
from tests.support.capture_helpers import closed_port_url
from tests.support.in_process_main import run_app_here

COMMON = ("--model", "tiny", "--no-realtime", "--every", "8", "--budget", "256", "--window", "16",
          "--max-new-tokens", "8", "--quiet")  # fmt: skip


def _answers(events, stream):
    return [(a.stream_time, a.question, a.answer) for a in of_type(events, "answer") if a.stream == stream]


@pytest.fixture(scope="module")
def two_streams(tmp_path_factory):
    folder = tmp_path_factory.mktemp("streams")
    together, alone = folder / "together.jsonl", folder / "alone.jsonl"
    a, b = video(24), video(24, size=(64, 48), fps=3.0)
    done = run_app_here("--stream", f"a={a}", "--stream", f"b={b}", *COMMON, "--log-jsonl", str(together))
    assert done.returncode == 0, done.stderr[-2000:]
    solo = run_app_here("--stream", f"b={b}", *COMMON, "--log-jsonl", str(alone))
    assert solo.returncode == 0, solo.stderr[-2000:]
    return done, read_log(together), read_log(alone)


def test_both_streams_are_watched_and_answered_in_one_process(two_streams):
    done, events, _ = two_streams
    for name in ("a", "b"):
        clips = [c for c in of_type(events, "clip") if c.stream == name]
        assert [c.stream_time for c in clips] == [4.0 * k for k in range(1, 7)]
        assert all(c.lag_s >= 0 and c.stats.cache_tokens <= 256 for c in clips)
        assert [t for t, _, _ in _answers(events, name)] == [8.0, 16.0, 24.0]
    assert {e.stream for e in of_type(events, "end")} == {"a", "b"}
    # every event names its stream (None: the whole process): stream events never leave it out
    assert all(e.stream in ("a", "b") for e in events if not isinstance(e, (Status, WarningEvent, ErrorEvent)))
    assert done.stderr.count("loading tiny") == 1  # one model for both


def test_the_worker_serves_streams_in_turn(two_streams):
    _, events, _ = two_streams
    order = [c.stream for c in of_type(events, "clip")][:6]
    assert order.count("a") == order.count("b") == 3  # one clip of each stream per turn: neither is starved
    assert "aaa" not in "".join(order) and "bbb" not in "".join(order)


def test_a_stream_answers_the_same_whether_or_not_another_stream_shares_the_model(two_streams):
    _, together, alone = two_streams
    # due at the same stream second, the two streams' answers were decoded as one batch ...
    assert {a.batch for a in of_type(together, "answer")} == {2}
    assert {a.batch for a in of_type(alone, "answer")} == {1}
    # ... and are token for token what the stream answers alone
    assert _answers(together, "b") == _answers(alone, "b")
    assert _answers(together, "a") != _answers(together, "b")  # other clips, other answers


def test_a_question_typed_for_one_stream_is_answered_by_that_stream_only(tmp_path):
    log = tmp_path / "typed.jsonl"
    done = run_app_here(
        "--stream", f"a={video(24)}", "--stream", f"b={video(24, size=(64, 48), fps=3.0)}", *COMMON,
        "--every", "0", "--max-rounds", "3", "--log-jsonl", str(log), stdin="b: what is on screen?\nwhat now?\n",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    asked = [(a.stream, a.question) for a in of_type(read_log(log), "answer")]
    assert asked.count(("b", "what is on screen?")) == 1 and ("a", "what is on screen?") not in asked
    assert sorted(s for s, q in asked if q == "what now?") == ["a", "b"]


def test_a_network_stream_that_is_down_reconnects_while_the_others_answer(tmp_path):
    log = tmp_path / "down.jsonl"
    done = run_app_here(
        "--stream", f"a={video(24)}", "--stream", f"cam={closed_port_url()}", *COMMON, "--max-rounds", "3",
        "--log-jsonl", str(log),
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    events = read_log(log)
    assert [a.stream for a in of_type(events, "answer")] == ["a", "a", "a"]
    down = [e for e in of_type(events, "error") if e.stream == "cam"]
    assert down and "reconnecting" in down[0].message
    states = [e.state for e in of_type(events, "capture") if e.stream == "cam"]
    assert states and set(states) == {"reconnecting"}  # the page and the log can show it as down
    assert not [e for e in of_type(events, "error") if e.stream == "a"]
