"""Yes/no verdicts: p_yes is read from the first answer token's logits (one forward, no text generated), equals
what plain transformers gives for the same tokens, and leaves the cache exactly as it was."""

import pytest
import torch
from transformers import DynamicCache

from cache.bounded_cache import BoundedCache
from cache.config import CacheConfig
from cache.forward_args import with_cache
from cache.runner import CachedRunner
from model.session import SessionConfig, StreamingSession
from model.verdict import YesNo, check_question, yes_probability
from tests.support.model_fixtures import random_frames
from tests.support.reference_lm import reference_lm, reference_text
from tests.support.session_helpers import loaded
from tests.support.tiny_text_models import ARCHITECTURES, VOCAB, build_pair


def test_p_yes_normalises_over_yes_and_no_only():
    tokens = YesNo(yes=(1, 2), no=(3,))
    logits = torch.full((1, 8), -5.0)
    logits[0, 7] = 9.0  # a third answer ("Sure") takes most of the mass: it does not count
    logits[0, [1, 2]] = torch.log(torch.tensor([0.3, 0.3]))
    logits[0, 3] = torch.log(torch.tensor(0.2))
    assert yes_probability(logits, tokens) == pytest.approx(0.6 / 0.8)
    assert yes_probability(torch.zeros(8), YesNo(yes=(0,), no=(1, 2))) == pytest.approx(1 / 3)


def test_the_check_asks_for_yes_or_no_once():
    assert check_question(" Is the gate open? ") == "Is the gate open? Answer yes or no."
    assert check_question("Is it? Answer yes or no.") == "Is it? Answer yes or no."


def _snapshot(cache: BoundedCache) -> dict:
    layer = cache.kv_layers[0]
    states = [t for _, conv, recurrent in cache.save_states() for t in (*conv.values(), *recurrent.values())]
    return {
        "length": cache.get_seq_length(),
        "next_position": cache.next_position,
        "tokens_seen": cache.tokens_seen,
        "keys": [lay.keys.clone() for lay in cache.kv_layers] + states,  # the hybrid: + its linear states
        "positions": layer.positions.clone(),
        "index": layer.token_index.clone(),
        "attention": layer.attention.clone(),
    }


def _same(a: dict, b: dict) -> bool:
    scalars = all(a[k] == b[k] for k in ("length", "next_position", "tokens_seen"))
    tensors = all(torch.equal(x, y) for x, y in zip(a["keys"], b["keys"], strict=True))
    return scalars and tensors and all(torch.equal(a[k], b[k]) for k in ("positions", "index", "attention"))


@pytest.mark.parametrize("policy", ["inf-mllm", "h2o", "streaming-llm"])
@pytest.mark.parametrize("arch", list(ARCHITECTURES))
def test_peeking_leaves_an_evicting_cache_as_it_was_and_the_next_answer_unchanged(arch, policy):
    _, bounded, dims = build_pair(arch)
    gen = torch.Generator().manual_seed(5)
    prompt, check, question = (torch.randint(3, VOCAB, (1, n), generator=gen) for n in (150, 12, 9))

    def run(peeks: int):
        cache = BoundedCache.for_model(bounded, CacheConfig(policy=policy, budget=48, window=8, recall=16))
        runner = CachedRunner(bounded, cache, position_dims=dims, chunk_size=16)
        with torch.inference_mode():
            runner.prefill(input_ids=prompt)
            before = _snapshot(cache)
            for _ in range(peeks):
                runner.peek(input_ids=check)
            unchanged = _same(before, _snapshot(cache))
            logits = runner.prefill(input_ids=question, evict_to=40)
            tokens = []
            for _ in range(6):
                tokens.append(int(logits.argmax(-1)))
                logits = runner.decode_step(tokens[-1])
        return unchanged, tokens

    unchanged, with_peeks = run(peeks=10)
    assert unchanged
    assert with_peeks == run(peeks=0)[1]


def test_p_yes_over_the_cache_is_what_plain_transformers_gives_on_a_real_model():
    lm = reference_lm()
    context = torch.tensor([lm.encode(reference_text()[:3000])])[:, :400]
    question = torch.tensor([lm.encode("Is the text about a garden? Answer yes or no.")])
    tokens = YesNo.of(lm.tokenizer)
    cache = BoundedCache.for_model(lm.model, CacheConfig(policy="full", budget=512, window=16))
    runner = CachedRunner(lm.model, cache)
    with torch.inference_mode():
        runner.prefill(input_ids=context)
        peeked = runner.peek(input_ids=question)
        both = torch.cat([context, question], 1)
        plain = lm.model(input_ids=both, **with_cache(lm.model, DynamicCache())).logits[:, -1]
    assert cache.get_seq_length() == context.shape[1]
    assert yes_probability(peeked, tokens) == pytest.approx(yes_probability(plain, tokens), abs=1e-4)
    assert {lm.tokenizer.decode([t]).strip().lower() for t in tokens.yes} <= {"yes", "y"}


def test_a_session_checks_without_filling_its_cache():
    model = loaded("tiny-qwen2-vl")

    def session() -> StreamingSession:
        s = StreamingSession(model, CacheConfig(budget=192, window=8, recall=32), SessionConfig(max_new_tokens=6))
        for k in range(3):
            s.ingest_clip(random_frames(2, seed=k), 4.0 * k, 4.0 * k + 4)
        return s

    checked, plain = session(), session()
    length = checked.cache.get_seq_length()
    verdicts = [checked.check("Is there a person?") for _ in range(10)]
    assert checked.cache.get_seq_length() == length and checked.cache.store.tokens == plain.cache.store.tokens
    assert len({v.p_yes for v in verdicts}) == 1 and 0.0 < verdicts[0].p_yes < 1.0
    assert verdicts[0].prompt_tokens > 0 and verdicts[0].ms > 0
    assert "".join(checked.ask("What now?")) == "".join(plain.ask("What now?"))
    with pytest.raises(ValueError, match="tokens"):
        checked.check("why " * 400)
    assert checked.cache.get_seq_length() == plain.cache.get_seq_length()
