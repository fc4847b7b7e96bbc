"""On the real reference LM, a cache whose budget holds the whole conversation changes nothing:
greedy answers through BoundedCache equal transformers' generate(), token for token, for every policy."""

import pytest
import torch

from cache.bounded_cache import BoundedCache
from cache.config import CacheConfig
from cache.runner import CachedRunner
from tests.support.policy_behaviours import BEHAVIOURS
from tests.support.reference_lm import reference_lm

NEW_TOKENS = 12


def chat_prompt(lm, question: str) -> torch.Tensor:
    ids = lm.tokenizer.apply_chat_template(
        [{"role": "user", "content": question}], add_generation_prompt=True, return_tensors="pt"
    )
    return ids if torch.is_tensor(ids) else ids["input_ids"]  # [1, T]


@pytest.fixture(scope="module")
def expected():
    lm = reference_lm()
    prompt = chat_prompt(lm, "What is the capital of France?")
    with torch.inference_mode():
        out = lm.model.generate(prompt, max_new_tokens=NEW_TOKENS, do_sample=False, eos_token_id=None)
    return prompt, out[0, prompt.shape[1] :].tolist()


def test_the_reference_model_is_the_real_one(expected):
    lm = reference_lm()
    prompt, answer = expected
    assert lm.model.config.num_hidden_layers == 30 and lm.model.config.num_key_value_heads == 3
    assert lm.tokenizer.decode(answer).startswith("The capital of France is Paris.")


@pytest.mark.parametrize("policy", BEHAVIOURS)
def test_greedy_answer_equals_generate(expected, policy):
    lm = reference_lm()
    prompt, answer = expected
    cache = BoundedCache.for_model(lm.model, CacheConfig(policy=policy, budget=256, window=16))
    runner = CachedRunner(lm.model, cache, lm.position_dims, chunk_size=16)  # several prefill chunks
    got = []
    logits = runner.prefill(input_ids=prompt, evict_to=256 - NEW_TOKENS)
    for _ in range(NEW_TOKENS):
        got.append(int(logits.argmax(-1)))
        logits = runner.decode_step(got[-1])
    assert got == answer
    assert cache.evictions == 0
