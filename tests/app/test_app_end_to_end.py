"""`python -m app` end to end: tiny model, generated videos, no realtime pacing."""

import pytest
import torch

from app.cli import DEFAULT_RECALL
from tests.support.app_helpers import of_type, read_log, video
from tests.support.in_process_main import run_app_here

BUDGET = 256


@pytest.fixture(scope="module")
def ten_minute_run(tmp_path_factory):
    log = tmp_path_factory.mktemp("run") / "events.jsonl"
    done = run_app_here(
        "--video", str(video(600)), "--model", "tiny", "--no-realtime", "--every", "20",
        "--budget", str(BUDGET), "--window", "16", "--max-new-tokens", "8", "--quiet", "--log-jsonl", str(log),
        env={"EDGE_ASSISTANT_CPU_KERNELS": "1"},
    )  # fmt: skip
    return done, read_log(log)


def test_ten_minutes_every_20_seconds_gives_30_answers_on_time(ten_minute_run):
    done, events = ten_minute_run
    assert done.returncode == 0, done.stderr[-2000:]
    answers = of_type(events, "answer")
    assert [a.stream_time for a in answers] == [20.0 * k for k in range(1, 31)]
    assert all(a.auto and a.question == "What is happening now?" for a in answers)
    assert [a.round for a in answers] == list(range(1, 31))
    # recall is on by default (256): a question may bring back that much, never more, and only for its answer
    assert max(a.stats.cache_tokens_end for a in answers) <= BUDGET + DEFAULT_RECALL
    assert all(a.stats.recalled_tokens > 0 and a.stats.store_tokens > 0 for a in answers[3:])
    for a in answers:  # every field the design promises
        for field in ("ttft_s", "decode_tokens_per_s", "cache_tokens_before", "evict_ms", "kv_bytes"):
            assert getattr(a.stats, field) is not None
        assert a.stats.process_rss_bytes > 0 and a.t_wall > 0


def test_clip_events_cover_the_stream_in_order(ten_minute_run):
    _, events = ten_minute_run
    clips = of_type(events, "clip")
    times = [c.stream_time for c in clips]
    assert times == sorted(times) and len(set(times)) == len(times)
    assert times[-1] == pytest.approx(600.0, abs=1.0)
    assert clips[-1].dropped_clips == 0  # no realtime: the capture waits for the model
    assert max(c.stats.cache_tokens for c in clips) <= BUDGET
    assert of_type(events, "end") and not of_type(events, "error")


def test_full_policy_grows_past_the_budget(tmp_path):
    log = tmp_path / "full.jsonl"
    done = run_app_here(
        "--video", str(video(120)), "--model", "tiny", "--no-realtime", "--every", "40", "--policy", "full",
        "--budget", str(BUDGET), "--window", "16", "--max-new-tokens", "8", "--quiet", "--log-jsonl", str(log),
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    sizes = [c.stats.cache_tokens for c in of_type(read_log(log), "clip")]
    assert sizes == sorted(sizes) and sizes[-1] > 2 * BUDGET


def test_stdin_questions_are_answered_in_order(tmp_path):
    log = tmp_path / "stdin.jsonl"
    done = run_app_here(
        "--video", str(video(60)), "--model", "tiny", "--no-realtime", "--every", "0", "--budget", str(BUDGET),
        "--window", "16", "--max-new-tokens", "6", "--quiet", "--log-jsonl", str(log), "--max-rounds", "3",
        stdin="What color is the square?\n\nHow many shapes?\nWhat changed?\n",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    answers = of_type(read_log(log), "answer")
    assert [a.question for a in answers] == ["What color is the square?", "How many shapes?", "What changed?"]
    assert not any(a.auto for a in answers)
    assert "── round 1" in done.stdout and "ttft" in done.stdout  # the terminal shows each answer


def test_a_damaged_file_is_an_error_event_and_the_run_ends_cleanly(tmp_path):
    from capture.synth import write_video
    from tests.support.capture_helpers import overwrite

    clean = tmp_path / "clean.ts"
    write_video(clean, size=(96, 64), fps=10, duration_s=30, options={"g": "10", "preset": "ultrafast"})
    data = clean.read_bytes()
    damaged = tmp_path / "damaged.ts"
    damaged.write_bytes(overwrite(data, [len(data) // 3, len(data) // 2], 600))
    log = tmp_path / "damaged.jsonl"
    done = run_app_here("--video", str(damaged), "--model", "tiny", "--no-realtime", "--every", "10",
                        "--budget", "128", "--window", "8", "--max-new-tokens", "4", "--quiet",
                        "--log-jsonl", str(log))  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    events = read_log(log)
    errors = of_type(events, "error")
    assert errors and all(e.where == "capture" and "damaged.ts" in e.message for e in errors)
    assert of_type(events, "end") and of_type(events, "clip")[-1].stream_time >= 25  # decoding went on
    assert len(of_type(events, "answer")) >= 2


def test_compiled_decoding_with_and_without_cpu_kernels_gives_the_eager_answers(ten_minute_run, tmp_path):
    """Eager decoding, the compiled step with the CPU decode kernels (AVX2 here) and the compiled step with them
    turned off: the same answers, after evictions. The eager answers are the ten-minute run's first minute (the
    same file, eager, kernels on); the two compiled runs watch that minute of it (`--duration 60`). Compiled with
    the kernels on is what `--compile` runs on this CPU by default. The compiled runs go through `main` in this
    process (no interpreter start nor torch import each), from a reset torch.compile as in a new process: nothing
    traced by earlier tests is reused, and no earlier trace counts toward its recompilation limit."""
    eager_run, eager_events = ten_minute_run
    assert eager_run.returncode == 0, eager_run.stderr[-2000:]
    assert "decode: eager" in eager_run.stderr
    eager = [a for a in of_type(eager_events, "answer") if a.stream_time <= 60.0]
    assert max(a.stats.cache_tokens_before for a in eager) > BUDGET  # later answers follow an eviction
    answers = {"eager": [a.answer for a in eager]}
    for name, kernels in (("compiled", "1"), ("compiled, kernels off", "0")):
        log = tmp_path / f"{name.replace(' ', '').replace(',', '-')}.jsonl"
        torch._dynamo.reset()
        done = run_app_here(
            "--video", str(video(600)), "--duration", "60", "--model", "tiny", "--no-realtime", "--every", "20",
            "--budget", str(BUDGET), "--window", "16", "--max-new-tokens", "8", "--quiet", "--log-jsonl", str(log),
            "--compile", env={"EDGE_ASSISTANT_CPU_KERNELS": kernels},
        )  # fmt: skip
        assert done.returncode == 0, done.stderr[-2000:]
        assert "decode: compiled" in done.stderr
        assert f"CPU kernels {'on' if kernels == '1' else 'off'}" in done.stderr
        events = of_type(read_log(log), "answer")
        assert max(a.stats.cache_tokens_before for a in events) > BUDGET  # later answers follow an eviction
        answers[name] = [a.answer for a in events]
    assert len(answers["eager"]) == 3
    assert answers["compiled"] == answers["eager"] and answers["compiled, kernels off"] == answers["eager"]


def test_quantize_int8_runs_the_stream_with_int8_layers(tmp_path):
    """`--quantize int8` end to end: the tiny model's 25 linear layers become int8 before the first clip, and
    the stream is watched and answered as in fp32."""
    log = tmp_path / "events.jsonl"
    done = run_app_here(
        "--video", str(video(60)), "--model", "tiny", "--no-realtime", "--every", "20", "--budget", str(BUDGET),
        "--window", "16", "--max-new-tokens", "8", "--quiet", "--log-jsonl", str(log), "--quantize", "int8",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    assert "int8: 25 linear layers, their weights 0.6 -> 0.2 MiB" in done.stderr
    assert done.stderr.index("int8: 25 linear layers") < done.stderr.index("model ready")
    events = read_log(log)
    assert len(of_type(events, "answer")) == 3 and of_type(events, "clip")
