"""Needle retrieval through the bounded cache: does a fact placed far back survive until it is asked for?

A needle ("The password of Captain Hale is velvet lantern.") is inserted at a random depth of a real text.
At the end its first half is given again as the cue, and the model must continue with the second half
(the answer). Scored by teacher forcing: exact = every answer token is the greedy choice given the ones
before it (the same as greedy generation reproducing the answer); log-prob = mean over the answer tokens.

Two protocols:
- question-aware: the text and the cue arrive as one prompt; the cache evicts once, after it (Inf-MLLM's
  Table 2 setting). One prefill of the prompt serves every policy (see `BoundedCache.fork`).
- stream: the text arrives in clips that each evict before the cue arrives (how the assistant runs).
"""

from __future__ import annotations

import random
import time
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

import torch

from cache.bounded_cache import BoundedCache
from cache.config import CacheConfig
from cache.policies import POLICIES
from cache.rope import KeyRotator
from cache.runner import CachedRunner
from cache.store.recall import recall_for_prompt

if TYPE_CHECKING:  # the kvpress side-by-side imports this module without the project's model/ stack
    from quality.lm import TextLM

ANSWER_HEADROOM = 16  # tokens kept free for the answer at the cue's eviction point (as the session does)

_OWNERS = (
    "Captain Hale", "the old ferryman", "Doctor Ravel", "the blue lighthouse", "Professor Okafor", "the night baker",
    "Sister Maren", "the tin soldier", "Admiral Quist", "the glass museum", "Mayor Delacroix", "the copper mill",
)  # fmt: skip
_THINGS = ("password", "secret word", "lucky charm", "favourite dish", "hidden treasure", "code name")
_FIRST = ("velvet", "strawberry", "marble", "cinnamon", "thunder", "silver", "orange", "paper", "midnight", "coral")
_SECOND = ("lantern", "pancake", "giraffe", "teapot", "violin", "compass", "pebble", "balloon", "kettle", "tiger")


@dataclass
class NeedleSample:
    context_ids: list[int]  # haystack with the needle inside
    cue_ids: list[int]  # what ends the prompt: the needle's first half again
    answer_ids: list[int]  # the needle's second half: what the model must continue with
    needle_start: int  # index of the needle's first token in context_ids
    needle: str

    @property
    def depth(self) -> float:
        return self.needle_start / max(len(self.context_ids), 1)


@dataclass
class NeedleResult:
    exact: bool
    logprob: float  # mean log-prob of the answer tokens
    token_logprobs: list[float]
    ttft_ms: float = 0.0  # stream protocol: from the cue's arrival to the first answer logits (recall included)
    recall_ms: float = 0.0  # of which recall: probe + ranking + copy
    recalled_tokens: int = 0


def make_samples(
    lm: TextLM, text: str, context_tokens: int, count: int, seed: int = 0, min_distance: int = 0
) -> list[NeedleSample]:
    """`count` samples of about `context_tokens` tokens each: random windows of `text`, one needle each,
    at a line start at a uniformly random depth from 5% of the window to `min_distance` tokens before its
    end (pass the cache budget there to place every needle beyond the budget)."""
    rng = random.Random(seed)
    text_ids = lm.encode(text)
    newline = lm.encode("\n")
    samples = []
    for _ in range(count):
        owner, thing = rng.choice(_OWNERS), rng.choice(_THINGS)
        first_half = f"The {thing} of {owner} is"
        answer = f" {rng.choice(_FIRST)} {rng.choice(_SECOND)}"
        head_ids, answer_ids = lm.encode(first_half), lm.encode(answer)
        needle_ids = newline + head_ids + answer_ids + lm.encode(".") + newline
        room = context_tokens - len(needle_ids)
        if room < 16 or room > len(text_ids):
            raise ValueError(f"context of {context_tokens} tokens does not fit this text ({len(text_ids)} tokens)")
        start = rng.randrange(0, len(text_ids) - room + 1)
        haystack = text_ids[start : start + room]
        lowest = int(room * 0.05)
        highest = room - min_distance - len(needle_ids)
        if highest <= lowest:
            raise ValueError(f"a context of {context_tokens} tokens leaves no room {min_distance} tokens from its end")
        at = _line_start_near(haystack, rng.randrange(lowest, highest), newline, highest)
        context = haystack[:at] + needle_ids + haystack[at:]
        cue = newline + lm.encode("Remember:") + newline + head_ids
        samples.append(NeedleSample(context, cue, answer_ids, at, (first_half + answer + ".")))
    return samples


def benchmark_sample(
    lm: TextLM, text: str, context_tokens: int, index: int, budget: int, seed: int = 0
) -> NeedleSample:
    """Sample `index` of the benchmark at one context length: the same needle and haystack in every run
    (and in scripts/kvpress_side_by_side.py), always beyond `budget` tokens from the end."""
    return make_samples(lm, text, context_tokens, 1, seed=seed + 1000 * index + context_tokens, min_distance=budget)[0]


def _line_start_near(ids: list[int], at: int, newline: list[int], limit: int) -> int:
    """The first index in [at, limit) that follows a newline token (or `at` if there is none)."""
    mark = newline[-1] if newline else None
    for i in range(at, limit):
        if i > 0 and ids[i - 1] == mark:
            return i
    return at


def question_aware(lm: TextLM, sample: NeedleSample, configs: dict[str, CacheConfig]) -> dict[str, NeedleResult]:
    """Scores every named cache config on one sample, the text and cue arriving as one prompt.

    The prompt minus its last `tail` tokens (the cue and at least one window) is prefilled once into a
    cache that does not evict (recording accumulated attention when a policy needs it); each config forks
    that cache, prefills the tail, evicts once to budget - headroom and is scored. This equals prefilling
    the whole prompt into each config's cache and evicting at its end.
    """
    prompt = sample.context_ids + sample.cue_ids
    tail = max([len(sample.cue_ids)] + [c.window for c in configs.values()])
    head = prompt[:-tail]
    total = len(prompt) + len(sample.answer_ids) + 1
    needs_accumulated = any(POLICIES[c.policy].capture == "accumulate" for c in configs.values())
    shared_config = CacheConfig(policy="h2o" if needs_accumulated else "full", budget=total, window=1)
    rotator = KeyRotator.from_model(lm.model)
    shared = BoundedCache(lm.model.config, shared_config, rotator)
    runner = CachedRunner(lm.model, shared, lm.position_dims, chunk_size=1024)
    runner.prefill(input_ids=torch.tensor([head]))
    results = {}
    for name, config in configs.items():
        cache = shared.fork(config, rotator)
        fork_runner = CachedRunner(lm.model, cache, lm.position_dims, chunk_size=1024)
        target = config.budget - ANSWER_HEADROOM if POLICIES[config.policy].evicts else None
        logits = fork_runner.prefill(input_ids=torch.tensor([prompt[-tail:]]), evict_to=target)
        results[name] = _score_answer(fork_runner, logits, sample.answer_ids)
    return results


def stream(lm: TextLM, sample: NeedleSample, config: CacheConfig, clip_tokens: int = 256) -> NeedleResult:
    """Scores one config on one sample, the text arriving in clips of `clip_tokens` that each evict."""
    cache = BoundedCache.for_model(lm.model, config)
    runner = CachedRunner(lm.model, cache, lm.position_dims, chunk_size=clip_tokens)
    context = sample.context_ids
    for start in range(0, len(context), clip_tokens):
        runner.prefill(input_ids=torch.tensor([context[start : start + clip_tokens]]))
    cue = torch.tensor([sample.cue_ids])
    started = time.perf_counter()
    recalled = recall_for_prompt(runner, input_ids=cue)  # nothing unless config.recall > 0
    target = config.budget - ANSWER_HEADROOM + recalled.tokens if POLICIES[config.policy].evicts else None
    logits = runner.prefill(input_ids=cue, evict_to=target)
    ttft_ms = (time.perf_counter() - started) * 1e3
    result = _score_answer(runner, logits, sample.answer_ids)
    return replace(result, ttft_ms=ttft_ms, recall_ms=recalled.search_ms + recalled.copy_ms,
                   recalled_tokens=recalled.tokens)  # fmt: skip


def _score_answer(runner: CachedRunner, logits: torch.Tensor, answer_ids: list[int]) -> NeedleResult:
    """Teacher-forces the answer after the prompt whose last logits ([1, vocab]) are given."""
    token_logprobs, exact = [], True
    for i, token in enumerate(answer_ids):
        logprobs = torch.log_softmax(logits[0].float(), dim=-1)
        token_logprobs.append(float(logprobs[token]))
        exact = exact and int(logprobs.argmax()) == token
        if i + 1 < len(answer_ids):
            logits = runner.decode_step(token)
    return NeedleResult(exact, sum(token_logprobs) / len(token_logprobs), token_logprobs)
