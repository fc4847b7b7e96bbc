"""What the bounded cache remembers, on the real reference LM: relations the quality benchmark shows,
kept small (1K-token contexts) so they run in CI. A needle always lies beyond the cache budget."""

import pytest

from cache.config import CacheConfig
from cache.policies import InfMllmSettings
from quality.needle import make_samples, question_aware, stream
from tests.support.reference_lm import reference_lm, reference_text

BUDGET, CONTEXT, SAMPLES = 256, 1024, 3


def configs() -> dict[str, CacheConfig]:
    return {
        "full": CacheConfig(policy="full", budget=BUDGET),
        "window": CacheConfig(policy="window", budget=BUDGET),
        "inf-mllm": CacheConfig(policy="inf-mllm", budget=BUDGET),
        "inf-mllm-published": CacheConfig(policy="inf-mllm", budget=BUDGET, policy_settings=InfMllmSettings(pool=1)),
    }


@pytest.fixture(scope="module")
def samples():
    return make_samples(reference_lm(), reference_text(), CONTEXT, SAMPLES, seed=11, min_distance=BUDGET)


@pytest.fixture(scope="module")
def question_aware_results(samples):
    lm = reference_lm()
    per_sample = [question_aware(lm, sample, configs()) for sample in samples]
    return {name: [results[name] for results in per_sample] for name in configs()}


def exact(results) -> int:
    return sum(r.exact for r in results)


def mean_logprob(results) -> float:
    return sum(r.logprob for r in results) / len(results)


def test_every_needle_lies_beyond_the_budget(samples):
    for sample in samples:
        distance_to_end = len(sample.context_ids) - sample.needle_start + len(sample.cue_ids)
        assert distance_to_end > BUDGET


def test_full_attention_retrieves_the_needle(question_aware_results):
    full = question_aware_results["full"]
    assert exact(full) >= SAMPLES - 1
    assert mean_logprob(full) > -1.5


def test_window_attention_loses_the_needle(question_aware_results):
    window = question_aware_results["window"]
    assert exact(window) == 0
    assert mean_logprob(window) < mean_logprob(question_aware_results["full"]) - 2.0


def test_in_the_stream_protocol_window_attention_loses_the_needle(samples, question_aware_results):
    lm = reference_lm()
    results = [stream(lm, sample, configs()["window"], clip_tokens=128) for sample in samples]
    assert exact(results) == 0
    assert mean_logprob(results) < mean_logprob(question_aware_results["full"]) - 2.0


def test_span_pooled_inf_mllm_keeps_the_needle_where_algorithm_1_loses_it(question_aware_results):
    full = question_aware_results["full"]
    pooled = question_aware_results["inf-mllm"]  # the default selection (span pooling)
    published = question_aware_results["inf-mllm-published"]  # pool=1: Algorithm 1 as published
    assert abs(mean_logprob(pooled) - mean_logprob(full)) < 0.5
    assert exact(pooled) >= exact(full) - 1
    assert mean_logprob(published) < mean_logprob(pooled) - 1.5


def test_in_the_stream_protocol_recall_from_the_host_store_brings_the_needle_back(samples, question_aware_results):
    lm = reference_lm()
    config = CacheConfig(policy="streaming-llm", budget=BUDGET, recall=128, block=32)
    with_recall = [stream(lm, sample, config, clip_tokens=128) for sample in samples]
    without = [stream(lm, sample, configs()["window"], clip_tokens=128) for sample in samples]
    assert mean_logprob(with_recall) > mean_logprob(without) + 3.0
    assert exact(with_recall) >= 1
